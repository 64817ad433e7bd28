/** Part 8: what a minimal Worker that acquires and releases costs in bundle size (min + gzip). */
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { type BenchContext, emptyPart, type PartResult } from "../context.js";

const ENTRIES = [
  { file: "edge-redlock.ts", label: "edge-redlock, built-in REST nodes" },
  { file: "edge-redlock-upstash.ts", label: "edge-redlock + its @upstash/redis adapter (with @upstash/redis)" },
  { file: "upstash-lock.ts", label: "@upstash/lock 0.2.1 (with @upstash/redis)" },
];

export async function bundlePart(_ctx: BenchContext): Promise<PartResult> {
  const part = emptyPart("bundle", "Bundle size of a minimal Worker");
  part.method.push(
    "Each Worker in tools/bench/worker-entries/ acquires and releases one lock in its fetch handler. esbuild bundles it (minified, ESM, platform browser, conditions workerd/worker/browser, target es2022); the size is of the output gzipped at level 9.",
  );
  const rows: string[][] = [];
  for (const entry of ENTRIES) {
    const path = fileURLToPath(new URL(`../worker-entries/${entry.file}`, import.meta.url));
    const result = await build({
      entryPoints: [path],
      bundle: true,
      minify: true,
      format: "esm",
      platform: "browser",
      conditions: ["workerd", "worker", "browser"],
      target: "es2022",
      write: false,
      logLevel: "silent",
    });
    const code = result.outputFiles[0]!.contents;
    const gzipped = gzipSync(code, { level: 9 }).byteLength;
    rows.push([
      entry.label,
      `tools/bench/worker-entries/${entry.file}`,
      (code.byteLength / 1024).toFixed(1),
      (gzipped / 1024).toFixed(1),
    ]);
  }
  part.tables.push({
    title: "Minimal Worker bundle (KiB)",
    columns: ["what", "entry", "minified", "min + gzip"],
    rows,
  });
  return part;
}
