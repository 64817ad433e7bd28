/**
 * Every TypeScript sample in README.md and in docs/*.md compiles: extracted block by block, each
 * type-checked as its own module (strict) under `moduleResolution` bundler and nodenext, importing
 * this package by its name from the freshly built dist/ (see samples.ts). So a sample cannot drift
 * from the API again. Negative controls prove the checker catches what it is there to catch.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { brokenLinks, headingAnchors, linksOf, type MarkdownFile, repositoryUrl } from "./links.js";
import { extractSamples, type Resolution, type Sample, typeCheckSamples } from "./samples.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
// Inside this package (so `edge-redlock` resolves to it by name) and ignored by git.
const WORK_ROOT = `${ROOT}node_modules/.cache/edge-redlock-readme-samples`;
const RESOLUTIONS: Resolution[] = ["bundler", "nodenext"];

/** The Markdown files whose samples are checked: the README, and every page of docs/. */
const FILES = [
  "README.md",
  ...readdirSync(`${ROOT}docs`)
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`),
];

/** Every sample of every file, each with the file it came from. */
const SAMPLES = FILES.flatMap((file) => {
  const markdown = readFileSync(`${ROOT}${file}`, "utf8");
  return extractSamples(markdown).map((sample) => ({ file, sample }));
});

/** The ```ts / ```typescript fences of a Markdown text (indented ones included), counted line by line. */
function countFences(markdown: string): number {
  return markdown.split("\n").filter((line) => /^ *```(ts|typescript)\s*$/.test(line)).length;
}

describe("README and docs samples", () => {
  it.each(FILES)("finds every TypeScript block of %s", (file) => {
    const markdown = readFileSync(`${ROOT}${file}`, "utf8");
    expect(extractSamples(markdown).length).toBe(countFences(markdown));
  });

  it("checks the README's samples and those of the docs, not an empty list", () => {
    const count = (prefix: string) => SAMPLES.filter((s) => s.file.startsWith(prefix)).length;
    expect(count("README.md")).toBeGreaterThanOrEqual(7);
    expect(count("docs/fencing.md")).toBeGreaterThanOrEqual(3);
    expect(count("docs/testing.md")).toBeGreaterThanOrEqual(3);
    expect(count("docs/")).toBeGreaterThanOrEqual(12);
  });

  it.each(RESOLUTIONS)("all compile, strict, with moduleResolution %s", (resolution) => {
    const errors = typeCheckSamples(
      SAMPLES.map((s) => s.sample),
      resolution,
      WORK_ROOT,
    );
    expect(errors.map((e) => `${SAMPLES[e.sample]?.file ?? "(no sample)"}:${e.line}: ${e.message}`)).toEqual([]);
  });
});

describe("README and docs links", () => {
  const files: MarkdownFile[] = FILES.map((path) => ({ path, text: readFileSync(`${ROOT}${path}`, "utf8") }));
  const repo = repositoryUrl(JSON.parse(readFileSync(`${ROOT}package.json`, "utf8")));

  it("package.json names the repository, its home page and where to report bugs", () => {
    const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, "utf8"));
    expect(repo).toMatch(/^https:\/\/github\.com\/[^/]+\/[^/]+$/);
    expect(pkg.homepage).toBe(`${repo}#readme`);
    expect(pkg.bugs).toEqual({ url: `${repo}/issues` });
  });

  it("every link works where it is read: the README's absolute (npm ships no docs/), the docs' to files and headings that exist", () => {
    expect(brokenLinks(files, ROOT, repo)).toEqual([]);
    // Not vacuous: the README links into docs/, the docs to each other.
    const links = (path: string) => linksOf(files.find((f) => f.path === path)?.text ?? "").map((l) => l.target);
    expect(links("README.md").filter((t) => t.startsWith(`${repo}/blob/main/docs/`)).length).toBeGreaterThan(10);
    expect(links("docs/architecture.md").filter((t) => !/^[a-z]+:/.test(t)).length).toBeGreaterThan(3);
  });

  it("negative control: reports a relative README link, a missing file, a missing heading and a dead link into the repository", () => {
    const broken: MarkdownFile[] = [
      { path: "README.md", text: "# Title\n[a](docs/fencing.md) [b](#nowhere) [c](#title)" },
      {
        path: "docs/x.md",
        text: `# X\n[d](missing.md) [e](fencing.md#no-such-heading) [f](${repo}/blob/main/docs/gone.md) [g](fencing.md)`,
      },
    ];
    expect(brokenLinks(broken, ROOT, repo)).toEqual([
      "README.md:2: relative link docs/fencing.md is dead on npm",
      "README.md:2: README.md has no heading #nowhere",
      "docs/x.md:2: docs/missing.md does not exist",
      "docs/x.md:2: docs/fencing.md has no heading #no-such-heading",
      "docs/x.md:2: docs/gone.md does not exist",
    ]);
  });

  it("names headings as GitHub does, and skips links in code", () => {
    const markdown = "## Background work, and `settled()`\n## What it costs\n## What it costs\n```md\n[x](y.md)\n```\n";
    expect([...headingAnchors(markdown)]).toEqual(["background-work-and-settled", "what-it-costs", "what-it-costs-1"]);
    expect(linksOf(markdown)).toEqual([]);
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
          'const { fencing, initializeFencing } = require("edge-redlock/fencing");',
          'const core = require("edge-redlock/core");',
          "console.log([Redlock, upstashNodes, withLock, initializeFencing, core.Redlock].map((f) => typeof f).join(' '));",
          "console.log(typeof fencing, core.Redlock === Redlock);",
        ].join("\n"),
      );
      const out = execFileSync(process.execPath, [file], { encoding: "utf8" });
      // The plain preset's client is a class of its own: it waits with backoff alone.
      expect(out.trim()).toBe("function function function function function\nobject false");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the sample checker (negative controls)", () => {
  const sample = (code: string, context = ""): Sample => ({ line: 1, code, context });

  it.each(RESOLUTIONS)(
    "catches a literal …, a missing import, a wrong option, a wrong subpath and the old fencing API (%s)",
    (resolution) => {
      const broken = [
        sample(
          'import { Redlock } from "edge-redlock";\nnew Redlock({ nodes: [{ url: "https://a", token: "…" }, …] });',
        ),
        sample('import { upstashNodes } from "edge-redlock/upstash";\nnew Redlock({ nodes: upstashNodes([]) });'),
        sample('import { Redlock } from "edge-redlock";\nnew Redlock({ nodes: [], retries: 3 });'),
        sample('import { withLock } from "edge-redlock/express";\nwithLock;'),
        // The fencing API before it moved to edge-redlock/fencing, as docs/fencing.md once had it.
        sample('import { Redlock } from "edge-redlock";\nnew Redlock({ nodes: [], fencing: true });'),
        sample("const n: number = charge();", "declare function charge(): string;"),
      ];
      const errors = typeCheckSamples(broken, resolution, WORK_ROOT);
      // Each broken sample reports at least one error: all lines are 1 here, so count by message.
      expect(errors.some((e) => /Expression expected|Invalid character/.test(e.message))).toBe(true);
      expect(errors.some((e) => /Cannot find name 'Redlock'/.test(e.message))).toBe(true);
      expect(errors.some((e) => /'retries' does not exist/.test(e.message))).toBe(true);
      expect(errors.some((e) => /Cannot find module 'edge-redlock\/express'/.test(e.message))).toBe(true);
      expect(errors.some((e) => /'string' is not assignable to type 'number'/.test(e.message))).toBe(true);
      expect(errors.some((e) => /Type 'true' is not assignable to type 'false \| Fencing/.test(e.message))).toBe(true);
      // Each error is attributed to the sample it came from.
      expect(new Set(errors.map((e) => e.sample))).toEqual(new Set([0, 1, 2, 3, 4, 5]));
    },
  );

  it("resolves the package by name to its built types, and a good sample passes", () => {
    const good = sample(
      'import { Redlock, isRedlockError } from "edge-redlock";\nimport { Redlock as PlainRedlock } from "edge-redlock/core";\nimport { fencing, initializeFencing } from "edge-redlock/fencing";\nimport { withLock } from "edge-redlock/hono";\nimport { upstashNodes } from "edge-redlock/upstash";\nconst r: Redlock = new Redlock({ nodes: [{ url: "https://a.example", token: "t" }], fencing });\nconst p: PlainRedlock = new PlainRedlock({ nodes: [{ url: "https://a.example", token: "t" }] });\nexport { r, p, isRedlockError, initializeFencing, withLock, upstashNodes };',
    );
    for (const resolution of RESOLUTIONS) expect(typeCheckSamples([good], resolution, WORK_ROOT)).toEqual([]);
  });

  it("reads the hidden context above a fence", () => {
    const markdown = "text\n<!-- sample-context\ndeclare const x: number;\n-->\n```ts\nconst y: number = x;\n```\n";
    expect(extractSamples(markdown)).toEqual([
      { line: 6, code: "const y: number = x;", context: "declare const x: number;" },
    ]);
  });

  it("reads a block indented in a list item, with its context, and skips other languages", () => {
    const markdown = [
      "1. Step:",
      "",
      "   <!-- sample-context",
      "   declare const x: number;",
      "   -->",
      "   ```ts",
      "   if (x > 0) {",
      "     console.log(x);",
      "   }",
      "   ```",
      "```sql",
      "SELECT 1;",
      "```",
    ].join("\n");
    expect(extractSamples(markdown)).toEqual([
      { line: 7, code: "if (x > 0) {\n  console.log(x);\n}", context: "   declare const x: number;" },
    ]);
  });
});
