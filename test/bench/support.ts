/**
 * A smoke run of benchmark parts for a test file (about a second a window, one round), into a
 * folder of its own that is removed at the end.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { type BenchRun, type PartId, runBench } from "../../tools/bench/bench.js";

/** Run `parts` once before the file's tests; the getters give the run and the folder it wrote. */
export function useSmokeRun(parts: PartId[], name: string, timeoutMs: number): { run: () => BenchRun; outDir: string } {
  const outDir = mkdtempSync(join(tmpdir(), `edge-redlock-bench-${name}-`));
  let run: BenchRun | undefined;
  beforeAll(async () => {
    run = await runBench({
      parts,
      quick: false,
      smoke: true,
      durationS: 1,
      rounds: 1,
      hotRounds: 1,
      outDir,
      command: `${name} smoke test`,
      print: false,
      provisional: true,
      log: () => {},
    });
  }, timeoutMs);
  afterAll(() => rmSync(outDir, { recursive: true, force: true }));
  return {
    run: () => {
      if (!run) throw new Error("the smoke run has not finished");
      return run;
    },
    outDir,
  };
}
