/**
 * `npm run bench:cpu-ab`: it bundles this checkout and another revision, runs both in one
 * process and prints a ratio (no figure is checked: speeds belong to the benchmark, not a test).
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../", import.meta.url));
const tool = (args: string[]) =>
  run(process.execPath, ["--import", "tsx", "tools/bench/cpu-ab.ts", ...args], { cwd: root, timeout: 60_000 });

describe("npm run bench:cpu-ab", () => {
  it("measures this checkout against a revision in one process and prints their ratio", async () => {
    const { stdout } = await tool(["--against", "HEAD", "--rounds", "2", "--runs", "50"]);
    expect(stdout).toMatch(/this checkout +median [\d.]+ µs/);
    expect(stdout).toMatch(/HEAD +median [\d.]+ µs/);
    const ratio = /this checkout ÷ HEAD, round by round: median ([\d.]+)/.exec(stdout);
    expect(Number(ratio?.[1])).toBeGreaterThan(0);
  }, 90_000);

  it("refuses to run without a revision, or with an entry it does not know", async () => {
    await expect(tool(["--rounds", "2"])).rejects.toThrow(/usage: npm run bench:cpu-ab/);
    await expect(tool(["--against", "HEAD", "--entry", "fencing/index"])).rejects.toThrow(/usage/);
    await expect(tool(["--against", "HEAD", "--rounds", "many"])).rejects.toThrow(/usage/);
    await expect(tool(["--against", "HEAD", "--runs", "0"])).rejects.toThrow(/usage/);
  }, 90_000);

  it("takes the revision as a name only: one that names no commit, or looks like an option, is refused", async () => {
    await expect(tool(["--against", "no-such-revision"])).rejects.toThrow(/"no-such-revision" names no commit/);
    // Passed to git archive as it was, this would write a file of its choosing.
    await expect(tool(["--against=--output=/tmp/cpu-ab-attack.tar", "--rounds", "1"])).rejects.toThrow(
      /names no commit/,
    );
    expect(existsSync("/tmp/cpu-ab-attack.tar")).toBe(false);
  }, 90_000);
});
