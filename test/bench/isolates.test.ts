/**
 * Smoke run of the isolates parts (`npm run bench -- --parts isolates,geo`): 2 client processes,
 * about a second per system. Every lock keeps its critical sections apart (0 lost updates, 0
 * overlapping holds) while handing the key over, the negative control (no lock) is caught, and
 * the request counter counts what each acquire() call sends to the lock nodes: nothing for the
 * negative control (the critical section's data-node requests are not lock requests), at least
 * one per node for the 3-node TCP peers. Timings are not checked: they belong to `npm run bench`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { PartResult } from "../../tools/bench/context.js";
import { isProcessAlive } from "../../tools/nodes/process-utils.js";
import { useSmokeRun } from "./support.js";

const { run: smokeRun, outDir } = useSmokeRun(["isolates", "geo"], "isolates", 240_000);

const part = (id: string) => smokeRun().parts.find((p) => p.id === id) as PartResult;
const locked = (p: PartResult) => (p.figures ?? []).filter((f) => !f.label.includes("negative control"));

describe("npm run bench, isolates parts, smoke", () => {
  it("runs every system in 2 processes of 2 callers, and each one hands the key over", () => {
    const rows = locked(part("isolates"));
    expect(rows.map((r) => r.label.replace(/ 2 × 2$/, ""))).toEqual(
      expect.arrayContaining([
        "edge-redlock (defaults)",
        "edge-redlock (retryDelay)",
        "@upstash/lock (defaults)",
        "@upstash/lock (equal)",
        "@sesamecare-oss/redlock (defaults)",
        "redlock-universal (defaults)",
      ]),
    );
    for (const { label, values } of rows) {
      expect({ label, p: values.p, callers: values.callers }).toEqual({ label, p: 2, callers: 2 });
      expect(values.handoffsPerS, label).toBeGreaterThan(0);
      expect(values.calls, label).toBeGreaterThan(0);
      expect(values.callP50, label).toBeGreaterThan(0);
      expect(values.requestsPerHandoff, label).toBeGreaterThan(0);
      // The key's history was read back: consecutive sections were found, each in one isolate or another.
      expect(values.sameIsolateNext, label).toBeGreaterThanOrEqual(0);
      expect(values.sameIsolateNext, label).toBeLessThanOrEqual(1);
    }
  });

  it("has no lost update and no overlapping hold under any lock, in either latency profile", () => {
    for (const id of ["isolates", "geo"]) {
      const violations = part(id).violations.filter((v) => !v.label.includes("negative control"));
      expect(violations.length, id).toBeGreaterThanOrEqual(3);
      for (const v of violations)
        expect({ label: v.label, lost: v.lostUpdates, overlaps: v.overlaps }).toEqual({
          label: v.label,
          lost: 0,
          overlaps: 0,
        });
    }
  });

  it("catches the negative control: callers without a lock overlap and lose updates", () => {
    const control = part("isolates").violations.find((v) => v.label.includes("negative control"))!;
    expect(control.overlaps).toBeGreaterThan(0);
    expect(control.lostUpdates).toBeGreaterThan(0);
  });

  it("counts lock requests per acquire() call: none without a lock, at least one per node for the TCP peers", () => {
    const figures = part("isolates").figures ?? [];
    const control = figures.find((f) => f.label.includes("negative control"))!;
    expect(control.values.calls).toBeGreaterThan(0);
    expect(control.values.callMax).toBe(0);
    for (const peer of figures.filter((f) => /^(@sesamecare-oss\/redlock|redlock-universal) /.test(f.label)))
      expect(peer.values.callMin, peer.label).toBeGreaterThanOrEqual(3);
    for (const row of locked(part("geo"))) expect(row.values.callP50, row.label).toBeGreaterThan(0);
  });

  it("states the geo profile's source and round trips, and writes the tables to RESULTS.md", () => {
    const geo = part("geo");
    expect(geo.method.join("\n")).toContain(
      "https://acomputerscientistlearnsaws.blogspot.com/2017/04/aws-regions.html",
    );
    expect(geo.tables.some((t) => t.title.startsWith("Geo profile: round trips"))).toBe(true);
    const results = readFileSync(join(outDir, "RESULTS.md"), "utf8");
    expect(results).toContain("Hot key across isolates, +20 ms");
    expect(results).toContain("Hot key across isolates, geo latency");
    expect(results).toContain("Per isolate, geo, 2 × 1");
  });

  it("leaves no node process behind", () => {
    expect(smokeRun().nodePids.length).toBeGreaterThan(1);
    for (const pid of smokeRun().nodePids) expect(isProcessAlive(pid), `pid ${pid}`).toBe(false);
  });
});
