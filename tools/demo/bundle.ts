/** Bundling a worker's entry point as wrangler would, for workerd run through Miniflare. */
import { build } from "esbuild";

/** `entry` and everything it imports, as one ES module for workerd. */
export async function bundleWorker(entry: string): Promise<string> {
  const bundle = await build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["module", "main"],
    write: false,
    logLevel: "silent",
  });
  return bundle.outputFiles[0]?.text ?? "";
}
