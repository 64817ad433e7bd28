/**
 * Packaging, on the freshly built dist/ (globalSetup test/runtimes/setup/build.ts):
 * - `npm run check:package`: publint (strict: warnings count) and @arethetypeswrong/cli with the
 *   esm-only profile (the package is ESM only, so CommonJS `require` resolution is not judged) on
 *   the packed tarball. Every subpath in package.json "exports" is checked by both.
 * - `npm pack --dry-run --json`: the tarball holds dist/, README.md, package.json (and a LICENSE if
 *   there is one), nothing else, and every file "exports" points to.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, run } from "../support/subprocess.js";

const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { exports: unknown };
const quiet = { npm_config_update_notifier: "false", NO_COLOR: "1" };

/** Every file path in an "exports" map (conditions and subpaths, recursively). */
function exportTargets(exports: unknown): string[] {
  if (typeof exports === "string") return [exports];
  if (exports === null || typeof exports !== "object") return [];
  return Object.values(exports).flatMap(exportTargets);
}

describe("packaging", () => {
  it("npm run check:package: publint --strict and attw --profile esm-only report no problem", async () => {
    const { code, stdout, stderr } = await run("npm", ["run", "check:package"], quiet, 120_000);
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    expect(stdout, "publint found nothing, not even a suggestion").toContain("All good!");
  }, 130_000);

  it("npm pack ships only dist/, README.md and package.json (and LICENSE), with every exported file", async () => {
    const { code, stdout, stderr } = await run("npm", ["pack", "--dry-run", "--json"], quiet, 60_000);
    expect(code, stderr).toBe(0);
    const [packed] = JSON.parse(stdout) as [{ files: { path: string }[] }];
    const files = packed.files.map((f) => f.path).sort();
    const unexpected = files.filter((f) => !/^(dist\/.+|README\.md|package\.json|LICEN[CS]E(\.(md|txt))?)$/i.test(f));
    expect(unexpected, "files outside dist/, README.md, package.json, LICENSE").toEqual([]);
    expect(files).toContain("README.md");
    expect(files).toContain("package.json");
    const targets = exportTargets(pkg.exports).map((t) => t.replace(/^\.\//, ""));
    expect(targets.length).toBeGreaterThan(0);
    for (const target of targets) expect(files, `"exports" points to ${target}`).toContain(target);
  }, 70_000);
});
