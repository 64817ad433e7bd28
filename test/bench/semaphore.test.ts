/**
 * Smoke run of the semaphore part (`npm run bench -- --parts semaphore`): one-second windows, 6
 * callers, two counterexample trials. Every subject is granted permits, and its requests are
 * counted on the client exactly as on the servers. edge-redlock's Semaphore never has more
 * holders at once than permits, under load or in the counterexample, where redis-semaphore's
 * RedlockSemaphore (a count per node) admits three holders of two permits: the overlap checker
 * catches it on real nodes. Timings are not checked: they belong to `npm run bench`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { PartResult } from "../../tools/bench/context.js";
import { isProcessAlive } from "../../tools/nodes/process-utils.js";
import { useSmokeRun } from "./support.js";

const { run: smokeRun, outDir } = useSmokeRun(["semaphore"], "semaphore", 120_000);

const part = () => smokeRun().parts.find((p) => p.id === "semaphore") as PartResult;
const figures = (match: string) => (part().figures ?? []).filter((f) => f.label.includes(match));
const EDGE = "edge-redlock Semaphore";
const SUBJECTS = [EDGE, `${EDGE} (10 ms retries)`, "redis-semaphore Semaphore", "redis-semaphore RedlockSemaphore"];

describe("npm run bench -- --parts semaphore, smoke", () => {
  it("grants permits to every subject at every load, and counts their requests as the servers do", () => {
    const load = (part().figures ?? []).filter((f) => !f.label.startsWith("counterexample"));
    expect(load).toHaveLength(12);
    for (const subject of SUBJECTS) {
      // Contended (6 callers) at k = 3 and k = 2, and uncontended (as many callers as permits).
      for (const config of ["k = 3", "k = 2", "k = 3, C = 3"]) {
        const row = load.find((f) => f.label === `${subject}, ${config}`);
        expect(row, `${subject}, ${config}`).toBeDefined();
        // A one-second window of 6 callers holding 20 ms: even a slow machine grants a few.
        expect(row?.values.grants, row?.label).toBeGreaterThanOrEqual(3);
        // Each grant needs at least one request to a node.
        expect(row?.values.requestsPerPermit, row?.label).toBeGreaterThanOrEqual(1);
        expect(Number.isFinite(row?.values.waitP50), row?.label).toBe(true);
        // The clients' own counts are the servers' (HTTP requests at the bridges, commands at the proxies).
        expect(row?.values.clientRequests, row?.label).toBeGreaterThan(0);
        expect(row?.values.clientRequests, row?.label).toBe(row?.values.serverRequests);
      }
    }
  });

  it("edge-redlock's Semaphore never has more holders at once than permits", () => {
    // Both waiting settings at each of the three loads, and the counterexample.
    const edge = figures(EDGE);
    expect(edge).toHaveLength(7);
    for (const f of edge) {
      const permits = f.values.permits ?? 2;
      expect(f.values.mostAtOnce, f.label).toBeLessThanOrEqual(permits);
      // Contended callers fill the permits: the checker sees the k holders it allows.
      if (!f.label.startsWith("counterexample")) expect(f.values.mostAtOnce, f.label).toBeGreaterThanOrEqual(1);
    }
    const check = part().checks.find((c) => c.target.startsWith("edge-redlock Semaphore"));
    expect(check?.pass).toBe(true);
  });

  it("the counterexample: the slot design admits at most two, the count per node three, caught by the checker", () => {
    const [edge] = figures(`counterexample, ${EDGE}`);
    expect(edge?.values.trials).toBe(2);
    expect(edge?.values.grants).toBeGreaterThanOrEqual(2);
    expect(edge?.values.excessTrials).toBe(0);
    expect(edge?.values.mostAtOnce).toBeLessThanOrEqual(2);
    const [counting] = figures("counterexample, redis-semaphore RedlockSemaphore");
    expect(counting?.values.trials).toBe(2);
    expect(counting?.values.excessTrials).toBeGreaterThanOrEqual(1);
    expect(counting?.values.mostAtOnce).toBe(3);
  });

  it("every table has its rows, and RESULTS.md has the part", () => {
    for (const table of part().tables) {
      expect(table.rows.length, table.title).toBeGreaterThan(0);
      for (const row of table.rows) expect(row).toHaveLength(table.columns.length);
    }
    const results = readFileSync(join(outDir, "RESULTS.md"), "utf8");
    expect(results).toContain("## Counting semaphores");
    expect(results).toContain("redis-semaphore 5.8.0");
  });

  it("leaves no node process behind", () => {
    expect(smokeRun().nodePids.length).toBeGreaterThan(1);
    for (const pid of smokeRun().nodePids) expect(isProcessAlive(pid), `pid ${pid}`).toBe(false);
  });
});
