/**
 * `npm run size`: what the core entry costs a user's bundle. Bundles dist/index.js (every export
 * of "edge-redlock", so no tree-shaking helps) with esbuild, minified, as an edge bundler would,
 * then gzips it (level 9). `npm run size` builds first; `npx tsx tools/size/size.ts [entry…]`
 * measures already built entries (default dist/index.js).
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface EntrySize {
  entry: string;
  minifiedBytes: number;
  gzippedBytes: number;
}

export async function measure(entry: string): Promise<EntrySize> {
  const path = resolve(ROOT, entry);
  if (!existsSync(path)) throw new Error(`${entry} does not exist: run \`npm run build\` first`);
  const result = await build({
    entryPoints: [path],
    bundle: true,
    minify: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  const code = result.outputFiles[0]!.contents;
  return { entry, minifiedBytes: code.byteLength, gzippedBytes: gzipSync(code, { level: 9 }).byteLength };
}

async function main(): Promise<void> {
  const entries = process.argv.slice(2);
  for (const entry of entries.length > 0 ? entries : ["dist/index.js"]) {
    const { minifiedBytes, gzippedBytes } = await measure(entry);
    const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
    process.stdout.write(
      `${entry}: ${minifiedBytes} bytes minified (${kb(minifiedBytes)}), ${gzippedBytes} bytes gzipped (${kb(gzippedBytes)})\n`,
    );
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: Error) => {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  });
}
