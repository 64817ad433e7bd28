/**
 * `npm run size`: what edge-redlock costs a user's bundle, against the size budgets of the design
 * and beside @upstash/lock. Each entry is a minimal Worker that acquires and releases one lock
 * (tools/bench/worker-entries/), bundled as a user's bundler would: esbuild, `--bundle --minify
 * --format=esm --platform=neutral`, then gzip level 9; 1 KiB = 1,024 B.
 *
 * Two limits per entry: the design's budget (the target; see the README's figures for how far each
 * entry is from it), and a ceiling (tools/size/ceilings.json: the size as last measured, plus 1 %)
 * that `--check` enforces in CI, so that nothing grows unnoticed. A change that must grow an entry
 * raises its ceiling in the same commit, and says why. `--modules` prints what each module costs.
 */

import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { byFolder, moduleCosts, workerBuild } from "./modules.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const KIB = 1024;

interface Entry {
  readonly label: string;
  readonly file: string;
  /** Budget in bytes, min + gzip, where the design sets one. */
  readonly budget?: number;
}

const ENTRIES: readonly Entry[] = [
  { label: "edge-redlock/core (the plain preset)", file: "edge-redlock-core.ts", budget: 10 * KIB },
  { label: "edge-redlock (default entry)", file: "edge-redlock.ts", budget: 15 * KIB },
  { label: "edge-redlock with fencing", file: "edge-redlock-fenced.ts", budget: 19 * KIB },
  { label: "edge-redlock + @upstash/redis adapter", file: "edge-redlock-upstash.ts" },
  { label: "edge-redlock + edge-redlock/otel (no API)", file: "edge-redlock-otel.ts" },
  { label: "@upstash/lock + @upstash/redis/cloudflare", file: "upstash-lock.ts" },
];

/** Minified and gzipped bytes of one entry. */
export async function measure(file: string): Promise<{ minifiedBytes: number; gzippedBytes: number }> {
  const result = await build(workerBuild(ROOT, file, true));
  const code = (result.outputFiles[0] as { contents: Uint8Array }).contents;
  return { minifiedBytes: code.byteLength, gzippedBytes: gzipSync(code, { level: 9 }).byteLength };
}

/** The ceilings `--check` enforces, in gzipped bytes, by entry file. */
function ceilings(): Record<string, number> {
  return JSON.parse(readFileSync(resolve(ROOT, "tools/size/ceilings.json"), "utf8")) as Record<string, number>;
}

async function main(): Promise<void> {
  if (process.argv.includes("--modules")) return printModules();
  const check = process.argv.includes("--check");
  const limits = ceilings();
  const kib = (bytes: number) => `${(bytes / KIB).toFixed(1)} KiB`;
  let overCeiling = 0;
  process.stdout.write("minimal Worker (acquire + release), esbuild minify + gzip -9:\n");
  for (const entry of ENTRIES) {
    const { minifiedBytes, gzippedBytes } = await measure(entry.file);
    const budget =
      entry.budget === undefined
        ? ""
        : gzippedBytes <= entry.budget
          ? `, within its ${kib(entry.budget)} budget`
          : `, over its ${kib(entry.budget)} budget by ${kib(gzippedBytes - entry.budget)}`;
    const ceiling = limits[entry.file];
    const grown = ceiling !== undefined && gzippedBytes > ceiling;
    if (grown) overCeiling++;
    const ceilingNote = ceiling === undefined ? "" : grown ? `, OVER its ceiling of ${ceiling} B` : "";
    process.stdout.write(
      `  ${entry.label.padEnd(44)} ${String(gzippedBytes).padStart(6)} B (${kib(gzippedBytes)}), ${kib(minifiedBytes)} minified${budget}${ceilingNote}\n`,
    );
  }
  if (check && overCeiling > 0) {
    process.stderr.write(
      "an entry grew past its ceiling (tools/size/ceilings.json): shrink it, or raise the ceiling and say why\n",
    );
    process.exit(1);
  }
}
/** `--modules`: each module's marginal cost in the plain preset and in the default entry. */
async function printModules(): Promise<void> {
  for (const entry of ENTRIES.filter((e) => e.budget !== undefined && !e.file.includes("fenced"))) {
    const costs = await moduleCosts(ROOT, entry.file);
    process.stdout.write(`\n${entry.label}: marginal min + gzip bytes per module (see tools/size/modules.ts)\n`);
    for (const cost of costs) {
      process.stdout.write(
        `  ${String(cost.marginalGzipBytes).padStart(6)} B  ${String(cost.minifiedBytes).padStart(6)} B minified  ${cost.module}\n`,
      );
    }
    const folders = [...byFolder(costs)].sort((a, b) => b[1] - a[1]);
    process.stdout.write(`  by folder: ${folders.map(([folder, bytes]) => `${folder} ${bytes} B`).join(", ")}\n`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: Error) => {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  });
}
