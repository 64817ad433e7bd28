/**
 * vitest globalSetup of the runtime-workerd project (after the build): bundles
 * test/runtimes/workerd/worker.ts, with the built package, into one ES module and provides it as
 * `workerdScript` for the Miniflare worker that vitest.config.ts declares.
 */
import { build } from "esbuild";
import type { TestProject } from "vitest/node";

export default async function setup(project: TestProject): Promise<void> {
  const result = await build({
    entryPoints: [new URL("../workerd/worker.ts", import.meta.url).pathname],
    bundle: true,
    format: "esm",
    platform: "neutral",
    conditions: ["workerd", "worker", "browser"],
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  project.provide("workerdScript", result.outputFiles[0]!.text);
}
