/**
 * Smoke run of every benchmark part (about a second each): the harness runs end to end, every
 * part produces rows, the correctness columns are 0 for every lock, the negative control (no
 * lock at all) is caught, and no node process is left behind. Timings are not checked here:
 * they belong to `npm run bench`. The isolates parts and the semaphore part have smoke runs of
 * their own (./isolates.test.ts, ./semaphore.test.ts).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PARTS, type PartId } from "../../tools/bench/bench.js";
import { MemoryStore } from "../../tools/bench/memory-store.js";
import { isProcessAlive } from "../../tools/nodes/process-utils.js";
import { useSmokeRun } from "./support.js";

const OWN_SMOKE_RUN: PartId[] = ["isolates", "geo", "semaphore"];
const parts = (Object.keys(PARTS) as PartId[]).filter((p) => !OWN_SMOKE_RUN.includes(p));

const { run: smokeRun, outDir } = useSmokeRun(parts, "smoke", 120_000);

describe("npm run bench, smoke", () => {
  it("runs every part, and every part produces rows", () => {
    expect(smokeRun().parts.map((p) => p.id)).toEqual(parts);
    for (const part of smokeRun().parts) {
      expect(part.tables.length, part.id).toBeGreaterThan(0);
      for (const table of part.tables) {
        expect(table.rows.length, `${part.id}: ${table.title}`).toBeGreaterThan(0);
        for (const row of table.rows) expect(row).toHaveLength(table.columns.length);
      }
    }
  });

  it("has no lost update and no overlapping hold under any lock", () => {
    const hot = smokeRun().parts.find((p) => p.id === "hotkey")!;
    const locked = hot.violations.filter((v) => !v.label.includes("negative control"));
    expect(locked.length).toBeGreaterThanOrEqual(5);
    for (const v of locked)
      expect({ label: v.label, lost: v.lostUpdates, overlaps: v.overlaps }).toEqual({
        label: v.label,
        lost: 0,
        overlaps: 0,
      });
  });

  it("overlapping resource sets: no key has two holders under any lock, and the checker catches clients without one", () => {
    const overlap = smokeRun().parts.find((p) => p.id === "overlap")!;
    const locked = overlap.violations.filter((v) => !v.label.includes("negative control"));
    expect(locked.length).toBe(3);
    for (const v of locked) expect({ label: v.label, overlaps: v.overlaps }).toEqual({ label: v.label, overlaps: 0 });
    const control = overlap.violations.find((v) => v.label.includes("negative control"))!;
    expect(control.overlaps).toBeGreaterThan(0);
  });

  it("catches the negative control: clients without a lock overlap and lose updates", () => {
    const hot = smokeRun().parts.find((p) => p.id === "hotkey")!;
    const control = hot.violations.find((v) => v.label.includes("negative control"))!;
    expect(control.overlaps).toBeGreaterThan(0);
    expect(control.lostUpdates).toBeGreaterThan(0);
  });

  it("writes RESULTS.md and readable SVG charts", () => {
    const results = readFileSync(join(outDir, "RESULTS.md"), "utf8");
    expect(results).toContain("Hot key");
    expect(results).toContain("Provisional");
    for (const file of ["uncontended-latency.svg", "hotkey-handoffs.svg", "hotkey-requests.svg"]) {
      const svg = readFileSync(join(outDir, file), "utf8");
      expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
      expect(svg.trimEnd().endsWith("</svg>")).toBe(true);
      expect(results).toContain(`](${file})`);
    }
    expect(existsSync(join(outDir, "RESULTS.md"))).toBe(true);
  });

  it("leaves no node process behind", () => {
    expect(smokeRun().nodePids.length).toBeGreaterThan(1);
    for (const pid of smokeRun().nodePids) expect(isProcessAlive(pid), `pid ${pid}`).toBe(false);
  });
});

describe("in-memory node of the CPU part", () => {
  it("fails loudly on a script it does not know", async () => {
    const store = await MemoryStore.create();
    expect(() => store.execute(["EVAL", "return redis.call('FLUSHALL')", 0])).toThrow(/no implementation of script/);
    expect(() => store.execute(["EVALSHA", "0".repeat(40), 0])).toThrow(/NOSCRIPT/);
  });
});
