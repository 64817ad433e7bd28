/**
 * Checker 1, lease mutual exclusion: no two grants of one resource overlap within their claimed
 * windows (`[acquired, min(released, claimed deadline)]`).
 * @module
 */
import type { HistoryEvent } from "../history.js";
import { type Grant, grantsOf } from "./grants.js";

/** One pair of overlapping grants. */
export interface Overlap {
  readonly resource: string;
  readonly first: { readonly process: string; readonly lock: string };
  readonly second: { readonly process: string; readonly lock: string };
  /** The overlap on the harness clock. */
  readonly start: number;
  readonly end: number;
}

/** What checker 1 found. */
export interface OverlapResult {
  readonly grants: number;
  readonly anomalies: readonly Overlap[];
  /** Longest overlap, ms (0 when none). */
  readonly maxOverlapMs: number;
}

/**
 * Tolerance for comparing times read by two processes, ms. Both read the host's wall clock through
 * `performance.timeOrigin`; the handshake of every run measures their difference (recorded as
 * `clock-offset`), typically a few hundredths of a millisecond.
 * @default 1
 */
export const CROSS_PROCESS_TOLERANCE_MS = 1;

/**
 * Finds every pair of grants of one resource whose claimed windows intersect by more than the
 * tolerance and, for two processes, the bounds of their clock handshakes.
 */
export function checkOverlaps(
  history: readonly HistoryEvent[],
  toleranceMs: number = CROSS_PROCESS_TOLERANCE_MS,
): OverlapResult {
  const grants = grantsOf(history);
  const byResource = new Map<string, Grant[]>();
  for (const g of grants) {
    const list = byResource.get(g.resource) ?? [];
    list.push(g);
    byResource.set(g.resource, list);
  }
  const anomalies: Overlap[] = [];
  for (const [resource, list] of byResource) {
    list.sort((a, b) => a.acquiredAt - b.acquiredAt);
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        const a = list[i] as Grant;
        const b = list[j] as Grant;
        const overlap = intersect(a, b);
        // Each process's readings are corrected by its measured clock offset (see `grantsOf`),
        // exact within its handshake's bound: two processes' readings may be off by both bounds.
        const bounds = sameProcess(a, b) ? 0 : a.clockUncertaintyMs + b.clockUncertaintyMs;
        if (overlap && overlap.end - overlap.start > toleranceMs + bounds) {
          anomalies.push({
            resource,
            first: { process: a.process, lock: a.lock },
            second: { process: b.process, lock: b.lock },
            ...overlap,
          });
        }
      }
    }
  }
  const maxOverlapMs = anomalies.reduce((m, o) => Math.max(m, o.end - o.start), 0);
  return { grants: grants.length, anomalies, maxOverlapMs };
}

/** Whether two grants were read by one client process (worker "c0.1" is process "c0"): one clock. */
function sameProcess(a: Grant, b: Grant): boolean {
  return a.process.split(".")[0] === b.process.split(".")[0];
}

/** The longest intersection of two grants' claimed windows, if any. */
function intersect(a: Grant, b: Grant): { start: number; end: number } | undefined {
  let best: { start: number; end: number } | undefined;
  for (const wa of a.windows) {
    for (const wb of b.windows) {
      const start = Math.max(wa.start, wb.start);
      const end = Math.min(wa.end, wb.end);
      if (end > start && (!best || end - start > best.end - best.start)) best = { start, end };
    }
  }
  return best;
}
