/**
 * `npm run size`: what edge-redlock costs a user's bundle, against the size budgets of the design
 * and beside @upstash/lock. Each entry is a minimal Worker that acquires and releases one lock
 * (tools/bench/worker-entries/), bundled as a user's bundler would: esbuild, `--bundle --minify
 * --format=esm --platform=neutral`, then gzip level 9; 1 KiB = 1,024 B. `--check` exits non-zero
 * when an entry with a budget is over it.
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const KIB = 1024;

interface Entry {
  readonly label: string;
  readonly file: string;
  /** Budget in bytes, min + gzip, where the design sets one. */
  readonly budget?: number;
}

const ENTRIES: readonly Entry[] = [
  { label: "edge-redlock (default entry)", file: "edge-redlock.ts", budget: 15 * KIB },
  { label: "edge-redlock with fencing", file: "edge-redlock-fenced.ts", budget: 19 * KIB },
  { label: "edge-redlock + @upstash/redis adapter", file: "edge-redlock-upstash.ts" },
  { label: "@upstash/lock + @upstash/redis/cloudflare", file: "upstash-lock.ts" },
];

/** Minified and gzipped bytes of one entry. */
export async function measure(file: string): Promise<{ minifiedBytes: number; gzippedBytes: number }> {
  const result = await build({
    entryPoints: [resolve(ROOT, "tools/bench/worker-entries", file)],
    bundle: true,
    minify: true,
    format: "esm",
    platform: "neutral",
    mainFields: ["module", "main"],
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  const code = (result.outputFiles[0] as { contents: Uint8Array }).contents;
  return { minifiedBytes: code.byteLength, gzippedBytes: gzipSync(code, { level: 9 }).byteLength };
}

async function main(): Promise<void> {
  const check = process.argv.includes("--check");
  const kib = (bytes: number) => `${(bytes / KIB).toFixed(1)} KiB`;
  let over = 0;
  process.stdout.write("minimal Worker (acquire + release), esbuild minify + gzip -9:\n");
  for (const entry of ENTRIES) {
    const { minifiedBytes, gzippedBytes } = await measure(entry.file);
    const verdict =
      entry.budget === undefined
        ? ""
        : gzippedBytes <= entry.budget
          ? `  within its ${kib(entry.budget)} budget`
          : `  OVER its ${kib(entry.budget)} budget by ${kib(gzippedBytes - entry.budget)}`;
    if (entry.budget !== undefined && gzippedBytes > entry.budget) over++;
    process.stdout.write(
      `  ${entry.label.padEnd(44)} ${String(gzippedBytes).padStart(6)} B (${kib(gzippedBytes)}), ${kib(minifiedBytes)} minified${verdict}\n`,
    );
  }
  process.stdout.write(
    "  the plain preset (edge-redlock/core, budget 10.0 KiB) does not exist yet: waiting and fencing are still part of the core\n",
  );
  if (check && over > 0) process.exit(1);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: Error) => {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  });
}
