/**
 * The portable suite in Deno: `deno test` (from the `deno` npm package, offline) on
 * portable.deno.ts, which imports the built package by name. Deno resolves it from this
 * repository's package.json and node_modules, as it does for any npm package in a project that
 * has them. The results come back as TAP, one vitest test per case.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describeExternalRuntime } from "../support/external-runtime.js";
import { parseTap, ROOT } from "../support/subprocess.js";

const DENO = join(ROOT, "node_modules", ".bin", "deno");
const env = { DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" };
const version = execFileSync(DENO, ["--version"], { env: { ...process.env, ...env }, encoding: "utf8" }).split(" ")[1];

describeExternalRuntime({
  title: `Deno ${version}`,
  command: DENO,
  args: [
    "test",
    "--sloppy-imports",
    "--reporter=tap",
    "--allow-net=127.0.0.1",
    "--allow-env=EDGE_REDLOCK_SUITE",
    "test/runtimes/deno/portable.deno.ts",
  ],
  env,
  parse: ({ stdout }) => parseTap(stdout),
  timeoutMs: 120_000,
});
