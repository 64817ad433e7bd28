/**
 * The isolates parts' client process, bundled once per part with esbuild (src/ as it is now
 * included), so that a run forks plain Node processes: under tsx, 16 client processes take
 * about 11 s of a 2-core machine to start, bundled about 2 s.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

export interface WorkerBundle {
  /** The bundled worker (an .mjs file). */
  path: string;
  /** Removes the bundle's directory. */
  dispose(): void;
}

export async function bundleIsolateWorker(): Promise<WorkerBundle> {
  const dir = mkdtempSync(join(tmpdir(), "edge-redlock-bench-isolate-"));
  const path = join(dir, "isolate-worker.mjs");
  try {
    await build({
      entryPoints: [fileURLToPath(new URL("./isolate-worker.ts", import.meta.url))],
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      outfile: path,
      logLevel: "error",
      // Bundled CommonJS dependencies (ioredis and its own) call require() for Node's built-ins.
      banner: {
        js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
      },
    });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return { path, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}
