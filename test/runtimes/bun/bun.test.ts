/**
 * The portable suite in Bun: `bun test` (from the `bun` npm package, offline) on
 * portable.bun.ts, which imports the built package by name. One vitest test per case, from Bun's
 * console report.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describeExternalRuntime } from "../support/external-runtime.js";
import { parseBun, ROOT } from "../support/subprocess.js";

const BUN = join(ROOT, "node_modules", ".bin", "bun");
const env = { NO_COLOR: "1", FORCE_COLOR: "0" };
const version = execFileSync(BUN, ["--version"], { env: { ...process.env, ...env }, encoding: "utf8" }).trim();

describeExternalRuntime({
  title: `Bun ${version}`,
  command: BUN,
  args: ["test", "./test/runtimes/bun/portable.bun.ts"],
  env,
  // Bun writes its per-test report to stderr.
  parse: ({ stderr }) => parseBun(stderr),
  timeoutMs: 120_000,
});
