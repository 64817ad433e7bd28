/**
 * Every TypeScript sample in README.md compiles: extracted block by block, each type-checked as
 * its own module (strict) under `moduleResolution` bundler and nodenext, importing this package
 * by its name from the freshly built dist/ (see samples.ts). So a sample cannot drift from the
 * API again. Negative controls prove the checker catches what it is there to catch.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { extractSamples, type Resolution, type Sample, typeCheckSamples } from "./samples.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
// Inside this package (so `edge-redlock` resolves to it by name) and ignored by git.
const WORK_ROOT = `${ROOT}node_modules/.cache/edge-redlock-readme-samples`;
const README = readFileSync(`${ROOT}README.md`, "utf8");
const RESOLUTIONS: Resolution[] = ["bundler", "nodenext"];

describe("README samples (finding 10)", () => {
  const samples = extractSamples(README);

  it("finds every TypeScript block", () => {
    const fences = README.split("\n").filter((line) => /^```(ts|typescript)\s*$/.test(line)).length;
    expect(samples.length).toBe(fences);
    expect(samples.length).toBeGreaterThanOrEqual(7);
  });

  it.each(RESOLUTIONS)("all compile, strict, with moduleResolution %s", (resolution) => {
    const errors = typeCheckSamples(samples, resolution, WORK_ROOT);
    expect(errors.map((e) => `README.md:${e.line}: ${e.message}`)).toEqual([]);
  });
});

describe("what the README says about CommonJS (finding 10)", () => {
  it("require() loads every entry of the built package on this Node, without a flag", () => {
    // A project of its own with the package installed (linked) in its node_modules, as a user has it.
    const dir = mkdtempSync(join(tmpdir(), "edge-redlock-cjs-"));
    mkdirSync(join(dir, "node_modules"));
    symlinkSync(ROOT, join(dir, "node_modules", "edge-redlock"), "dir");
    try {
      const file = `${dir}/load.cjs`;
      writeFileSync(
        file,
        [
          'const { Redlock } = require("edge-redlock");',
          'const { upstashNodes } = require("edge-redlock/upstash");',
          'const { withLock } = require("edge-redlock/hono");',
          "console.log([typeof Redlock, typeof upstashNodes, typeof withLock].join(' '));",
        ].join("\n"),
      );
      const out = execFileSync(process.execPath, [file], { encoding: "utf8" });
      expect(out.trim()).toBe("function function function");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the sample checker (negative controls)", () => {
  const sample = (code: string, context = ""): Sample => ({ line: 1, code, context });

  it.each(RESOLUTIONS)(
    "catches a literal …, a missing import, a wrong option and a wrong subpath (%s)",
    (resolution) => {
      const broken = [
        sample(
          'import { Redlock } from "edge-redlock";\nnew Redlock({ nodes: [{ url: "https://a", token: "…" }, …] });',
        ),
        sample('import { upstashNodes } from "edge-redlock/upstash";\nnew Redlock({ nodes: upstashNodes([]) });'),
        sample('import { Redlock } from "edge-redlock";\nnew Redlock({ nodes: [], retries: 3 });'),
        sample('import { withLock } from "edge-redlock/express";\nwithLock;'),
        sample("const n: number = charge();", "declare function charge(): string;"),
      ];
      const errors = typeCheckSamples(broken, resolution, WORK_ROOT);
      // Each broken sample reports at least one error: all lines are 1 here, so count by message.
      expect(errors.some((e) => /Expression expected|Invalid character/.test(e.message))).toBe(true);
      expect(errors.some((e) => /Cannot find name 'Redlock'/.test(e.message))).toBe(true);
      expect(errors.some((e) => /'retries' does not exist/.test(e.message))).toBe(true);
      expect(errors.some((e) => /Cannot find module 'edge-redlock\/express'/.test(e.message))).toBe(true);
      expect(errors.some((e) => /'string' is not assignable to type 'number'/.test(e.message))).toBe(true);
    },
  );

  it("resolves the package by name to its built types, and a good sample passes", () => {
    const good = sample(
      'import { Redlock, isRedlockError } from "edge-redlock";\nimport { withLock } from "edge-redlock/hono";\nimport { upstashNodes } from "edge-redlock/upstash";\nconst r: Redlock = new Redlock({ nodes: [{ url: "https://a.example", token: "t" }] });\nexport { r, isRedlockError, withLock, upstashNodes };',
    );
    for (const resolution of RESOLUTIONS) expect(typeCheckSamples([good], resolution, WORK_ROOT)).toEqual([]);
  });

  it("reads the hidden context above a fence", () => {
    const markdown = "text\n<!-- sample-context\ndeclare const x: number;\n-->\n```ts\nconst y: number = x;\n```\n";
    expect(extractSamples(markdown)).toEqual([
      { line: 6, code: "const y: number = x;", context: "declare const x: number;" },
    ]);
  });
});
