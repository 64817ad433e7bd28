/**
 * The package as a user installs it: `npm pack` of the freshly built package (globalSetup
 * test/runtimes/setup/build.ts) into a temp folder, installed with `npm install <tarball>
 * --offline` into a fresh consumer project there (the package has no dependencies; its optional
 * peers `hono`, `@upstash/redis` and `@opentelemetry/api` are linked from this checkout), then:
 * - a sample that uses every entry type-checks, strict (and `exactOptionalPropertyTypes`,
 *   `noUncheckedIndexedAccess`, the shipped `.d.ts` files checked too), under `moduleResolution`
 *   bundler and nodenext; a wrong option and a deep import into dist/ fail (negative controls);
 * - the installed package runs: a lock on memory nodes, and the preflight;
 * - every relative link of the packed README resolves to a file inside the tarball (and every
 *   anchor to one of its headings); other links are absolute.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, normalize } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { headingAnchors, linksOf } from "../../readme/links.js";
import { ROOT } from "../support/subprocess.js";

const exec = promisify(execFile);
const quiet = { ...process.env, npm_config_update_notifier: "false", NO_COLOR: "1" };
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");
const RESOLUTIONS = { bundler: "ESNext", nodenext: "NodeNext" } as const;

let dir: string;
let consumer: string;
/** The tarball's files, as `npm pack --json` lists them. */
let packed: string[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "edge-redlock-consumer-"));
  const { stdout } = await exec("npm", ["pack", "--json", "--pack-destination", dir], { cwd: ROOT, env: quiet });
  const [tarball] = JSON.parse(stdout) as [{ filename: string; files: { path: string }[] }];
  packed = tarball.files.map((f) => f.path);
  consumer = join(dir, "consumer");
  mkdirSync(consumer);
  writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  await exec("npm", ["install", join(dir, tarball.filename), "--offline", "--no-audit", "--no-fund"], {
    cwd: consumer,
    env: quiet,
  });
  // The optional peers, for the samples of edge-redlock/hono and edge-redlock/upstash.
  mkdirSync(join(consumer, "node_modules/@upstash"), { recursive: true });
  symlinkSync(join(ROOT, "node_modules/hono"), join(consumer, "node_modules/hono"), "dir");
  symlinkSync(join(ROOT, "node_modules/@upstash/redis"), join(consumer, "node_modules/@upstash/redis"), "dir");
  mkdirSync(join(consumer, "node_modules/@opentelemetry"), { recursive: true });
  symlinkSync(join(ROOT, "node_modules/@opentelemetry/api"), join(consumer, "node_modules/@opentelemetry/api"), "dir");
}, 120_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Type-check `code` as the consumer's own module under `resolution`; the compiler's errors, or "". */
async function typeCheck(code: string, resolution: keyof typeof RESOLUTIONS): Promise<string> {
  const name = `sample-${resolution}-${Math.random().toString(36).slice(2)}`;
  writeFileSync(join(consumer, `${name}.ts`), code);
  writeFileSync(
    join(consumer, `${name}.json`),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        exactOptionalPropertyTypes: true,
        noUncheckedIndexedAccess: true,
        noEmit: true,
        target: "ES2022",
        lib: ["ES2022", "DOM"],
        types: [],
        module: RESOLUTIONS[resolution],
        moduleResolution: resolution,
        skipLibCheck: false,
      },
      files: [`${name}.ts`],
    }),
  );
  try {
    await exec(process.execPath, [TSC, "-p", `${name}.json`], { cwd: consumer, env: quiet });
    return "";
  } catch (error) {
    return String((error as { stdout?: string }).stdout ?? error);
  }
}

const SAMPLE = `
import { metrics, trace } from "@opentelemetry/api";
import { Redis } from "@upstash/redis";
import { Hono } from "hono";
import { checkNodes, isRedlockError, type Lock, type PreflightReport, Redlock } from "edge-redlock";
import { Redlock as PlainRedlock } from "edge-redlock/core";
import { compareFences, fencing, initializeFencing } from "edge-redlock/fencing";
import { type LockVariables, withLock } from "edge-redlock/hono";
import { instrument } from "edge-redlock/otel";
import { memoryNode, memoryNodes } from "edge-redlock/testing";
import { upstashNodes } from "edge-redlock/upstash";

export async function fenced(): Promise<string> {
  const redlock = new Redlock({ nodes: memoryNodes(3), fencing });
  await initializeFencing(redlock);
  const report: PreflightReport = await checkNodes(redlock, { clockSpacingMs: 100 });
  if (!report.ok) throw new Error(report.summary.join("\\n"));
  try {
    return await redlock.using("r", 1000, async (signal: AbortSignal, lock: Lock) => \`\${lock.fence}:\${signal.aborted}\`);
  } catch (error) {
    if (isRedlockError(error, "LOCK_HELD")) return error.heldOn.join(",");
    throw error;
  }
}

const plain = instrument(new PlainRedlock({ nodes: [memoryNode(), memoryNode(), memoryNode()] }), {
  meter: metrics.getMeter("consumer"),
  tracer: trace.getTracer("consumer"),
  resourceAttribute: ([resource]) => resource?.split(":")[0],
});
export const app = new Hono<{ Variables: LockVariables }>();
app.post("/x", withLock({ redlock: plain, ttlMs: 1000, resource: () => "x" }), (c) => c.text(c.get("lock").resources.join()));
export const nodes = upstashNodes([new Redis({ url: "https://db.example", token: "t" })]);
export const order: number = compareFences("2", "10");
`;

describe("the packed package in a fresh consumer project", () => {
  it("ships what a consumer needs: every entry's code and types, the README and the LICENSE", () => {
    for (const entry of [
      "index",
      "core/index",
      "fencing/index",
      "upstash/index",
      "hono/index",
      "testing/index",
      "otel/index",
    ]) {
      expect(packed).toContain(`dist/${entry}.js`);
      expect(packed).toContain(`dist/${entry}.d.ts`);
    }
    expect(packed).toContain("README.md");
  });

  it.each(Object.keys(RESOLUTIONS) as (keyof typeof RESOLUTIONS)[])(
    "type-checks a sample using every entry, strict, with moduleResolution %s",
    async (resolution) => {
      expect(await typeCheck(SAMPLE, resolution)).toBe("");
    },
    60_000,
  );

  it.each(Object.keys(RESOLUTIONS) as (keyof typeof RESOLUTIONS)[])(
    "negative controls (%s): a wrong option and a deep import into dist/ are errors",
    async (resolution) => {
      const wrongOption = await typeCheck(
        'import { Redlock } from "edge-redlock";\nnew Redlock({ nodes: [], retries: 3 });\n',
        resolution,
      );
      expect(wrongOption).toMatch(/'retries' does not exist/);
      const deep = await typeCheck(
        'import { Redlock } from "edge-redlock/dist/core/redlock.js";\nexport const r = Redlock;\n',
        resolution,
      );
      expect(deep).toMatch(/Cannot find module 'edge-redlock\/dist\/core\/redlock\.js'/);
    },
    60_000,
  );

  it("runs as installed: a lock on memory nodes, then the preflight", async () => {
    writeFileSync(
      join(consumer, "run.mjs"),
      [
        'import { checkNodes, Redlock } from "edge-redlock";',
        'import { memoryNodes } from "edge-redlock/testing";',
        "const redlock = new Redlock({ nodes: memoryNodes(3) });",
        'const lock = await redlock.acquire("run", 1000);',
        "const { released } = await lock.release();",
        "const report = await checkNodes(redlock, { clockSpacingMs: 100 });",
        // The release settles once a quorum answered.
        "console.log(JSON.stringify({ released: released >= 2, ok: report.ok, first: report.nodes[0].findings[0].code }));",
      ].join("\n"),
    );
    const { stdout } = await exec(process.execPath, ["run.mjs"], { cwd: consumer, env: quiet });
    expect(JSON.parse(stdout)).toEqual({ released: true, ok: true, first: "REACHABLE" });
  }, 60_000);

  it("has no relative link in the packed README that the tarball does not hold", () => {
    const readme = readFileSync(join(consumer, "node_modules/edge-redlock/README.md"), "utf8");
    expect(readme).toBe(readFileSync(join(ROOT, "README.md"), "utf8"));
    expect(linksOf(readme).length).toBeGreaterThan(10);
    expect(deadLinks(readme, packed)).toEqual([]);
  });

  it("negative control: the link check reports a link to an unshipped file and to a missing heading", () => {
    const readme = [
      "# Title",
      "## Install",
      "[ok](#install) [ok](https://example.com/x.md) [ok](./LICENSE) [ok](mailto:a@b.c)",
      "[dead](docs/fencing.md) [dead](#nowhere) [dead](../README.md)",
      '<a href="bench/RESULTS.md">dead</a>',
      "```md",
      "[in code](not-checked.md)",
      "```",
    ].join("\n");
    expect(deadLinks(readme, ["README.md", "LICENSE", "package.json"])).toEqual([
      "line 4: docs/fencing.md is not in the tarball",
      "line 4: #nowhere is no heading of the README",
      "line 4: ../README.md is not in the tarball",
      "line 5: bench/RESULTS.md is not in the tarball",
    ]);
  });
});

/** The README's links that are dead in the tarball whose files are `files`: relative ones to unshipped files, anchors to no heading. */
function deadLinks(readme: string, files: readonly string[]): string[] {
  const anchors = headingAnchors(readme);
  const links = [...linksOf(readme)];
  // HTML links and images, outside code fences (linksOf covers Markdown ones).
  let inFence = false;
  readme.split("\n").forEach((line, i) => {
    if (/^ *```/.test(line)) inFence = !inFence;
    if (inFence) return;
    for (const match of line.matchAll(/\b(?:href|src)="([^"]+)"/g))
      links.push({ line: i + 1, target: match[1] as string });
  });
  const dead: string[] = [];
  for (const { line, target } of links.sort((a, b) => a.line - b.line)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    const [path = "", anchor] = target.split("#") as [string, string | undefined];
    if (path === "") {
      if (!anchors.has(anchor ?? "")) dead.push(`line ${line}: #${anchor} is no heading of the README`);
      continue;
    }
    const file = normalize(decodeURIComponent(path.split("?")[0] as string)).replace(/^\.\//, "");
    if (file.startsWith("..") || !files.includes(file)) dead.push(`line ${line}: ${path} is not in the tarball`);
  }
  return dead;
}
