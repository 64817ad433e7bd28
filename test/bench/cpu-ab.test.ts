/**
 * `npm run bench:cpu-ab`: it bundles this checkout and another revision, runs both in one
 * process and prints a ratio (no figure is checked: speeds belong to the benchmark, not a test).
 */
import { execFile } from "node:child_process";
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
  }, 90_000);
});
