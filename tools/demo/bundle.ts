/** Bundling a worker's entry point as wrangler would, for workerd run through Miniflare. */
import { build } from "esbuild";

/** `entry` and everything it imports, as one ES module for workerd. */
export async function bundleWorker(entry: string): Promise<string> {
  const bundle = await build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    // wrangler's own: esbuild's browser platform, so a package's "browser" field (the
    // OpenTelemetry SDK's platform code) is followed, with the workerd conditions first.
    platform: "browser",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    write: false,
    logLevel: "silent",
  });
  return bundle.outputFiles[0]?.text ?? "";
}
