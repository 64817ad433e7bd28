/**
 * `npm run size -- --modules`: what each module of `src/` adds to an entry's min + gzip bytes, to
 * tell where a size budget goes. A module's cost is its marginal one: the gzipped size of the
 * entry's modules, each minified, less the same without that module. Gzip finds repeats across
 * modules, so a module whose text repeats others' (option checks alike in form, one message
 * template used many times) costs less than its minified bytes suggest, and removing it saves
 * about this figure, not its share of the minified bytes. The marginal costs add up to a little
 * less than the entry's size (what modules share is counted in none of them).
 */

import { resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { type BuildOptions, build, transform } from "esbuild";

/** How a user's bundler builds the minimal Worker `file` of tools/bench/worker-entries/ (minified or not). */
export function workerBuild(root: string, file: string, minify: boolean): BuildOptions & { write: false } {
  return {
    absWorkingDir: root,
    entryPoints: [resolve(root, "tools/bench/worker-entries", file)],
    bundle: true,
    minify,
    format: "esm",
    platform: "neutral",
    mainFields: ["module", "main"],
    target: "es2022",
    write: false,
    logLevel: "silent",
  };
}

/** One module's cost in an entry. */
export interface ModuleCost {
  readonly module: string;
  readonly minifiedBytes: number;
  /** Gzipped bytes the entry would lose without this module's code. */
  readonly marginalGzipBytes: number;
}

/** Each module's cost in the entry `file` of tools/bench/worker-entries/, largest first. */
export async function moduleCosts(root: string, file: string): Promise<ModuleCost[]> {
  const result = await build(workerBuild(root, file, false));
  // An unminified bundle opens each module's code with a comment naming it.
  const text = (result.outputFiles[0] as { text: string }).text;
  const chunks = text.split(/^(?=\/\/ (?:src|tools|node_modules)\/)/m);
  const minified: { module: string; code: string }[] = [];
  for (const chunk of chunks) {
    const module = /^\/\/ (\S+)/.exec(chunk)?.[1] ?? "(bundle glue)";
    const { code } = await transform(chunk, { minify: true, format: "esm", target: "es2022", loader: "js" });
    minified.push({ module, code });
  }
  const gzipped = (parts: readonly { code: string }[]) =>
    gzipSync(parts.map((p) => p.code).join("\n"), { level: 9 }).byteLength;
  const whole = gzipped(minified);
  return minified
    .map((part, i) => ({
      module: part.module,
      minifiedBytes: part.code.length,
      marginalGzipBytes: whole - gzipped(minified.filter((_, j) => j !== i)),
    }))
    .sort((a, b) => b.marginalGzipBytes - a.marginalGzipBytes);
}

/** The costs summed by folder of `src/` (`src/core/operations` counts in `src/core`). */
export function byFolder(costs: readonly ModuleCost[]): Map<string, number> {
  const folders = new Map<string, number>();
  for (const cost of costs) {
    const folder = cost.module.split("/").slice(0, 2).join("/");
    folders.set(folder, (folders.get(folder) ?? 0) + cost.marginalGzipBytes);
  }
  return folders;
}
