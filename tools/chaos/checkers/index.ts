/**
 * All checkers over one history.
 * @module
 */
import type { HistoryEvent, LockEvent } from "../history.js";
import { type BackingResult, checkBacking } from "./backing.js";
import { type ClaimResult, checkClaims } from "./claims.js";
import { type CounterResult, checkCounters } from "./counter.js";
import { checkForeignTouches, type ForeignTouchResult } from "./foreign-touch.js";
import { grantsOf } from "./grants.js";
import { checkLiveness, type LivenessResult } from "./liveness.js";
import { CROSS_PROCESS_TOLERANCE_MS, checkOverlaps, type OverlapResult } from "./overlap.js";
import { checkPrimitiveGrants, type PrimitiveGrant, type PrimitiveResult } from "./primitives.js";

/** Results of checkers 1–6. */
export interface CheckResults {
  readonly overlap: OverlapResult;
  readonly claims: ClaimResult;
  /** Checker 2 against the nodes' MONITOR log. */
  readonly backing: BackingResult;
  readonly foreignTouch: ForeignTouchResult;
  readonly counter: CounterResult;
  readonly liveness: LivenessResult;
  /** Checkers 6 and 7, over the grants of semaphores and read-write locks. */
  readonly primitives: PrimitiveResult;
}

/** Anomaly counts per checker, the figures the summary table and the tests use. */
export interface AnomalyCounts {
  /** C1: overlapping grants. */
  readonly overlap: number;
  /** C2: claims later than the quorum's real expiry (the audits and the nodes' log together). */
  readonly overClaim: number;
  /** C3: releases or extensions that touched another client's key. */
  readonly foreignTouch: number;
  /** C4: lost updates on the unfenced counter. */
  readonly lostUnfenced: number;
  /** C4: lost updates on the fenced counter (`null`: fencing unavailable). */
  readonly lostFenced: number | null;
  /** C6: semaphores that had more claimed windows open at once than permits. */
  readonly overPermits: number;
  /** C7: write windows overlapping another window of the same read-write lock. */
  readonly readWrite: number;
}

/** Runs every checker. */
export function checkHistory(
  history: readonly HistoryEvent[],
  options: { nodes: number; quorum: number; maxTtlMs: number },
): CheckResults {
  // A primitive's grants are several at once by design (a semaphore, readers), and its keys are
  // not the resource's: C1 and C2 check the mutexes, C6 and C7 the primitives.
  const isPrimitive = (e: HistoryEvent) => (e as LockEvent).mode !== undefined;
  const primitiveLocks = new Set(history.filter(isPrimitive).map((e) => `${e.process}/${(e as LockEvent).lock}`));
  const ofPrimitive = (e: HistoryEvent) =>
    (e as LockEvent).lock !== undefined && primitiveLocks.has(`${e.process}/${(e as LockEvent).lock}`);
  const mutexes = primitiveLocks.size === 0 ? history : history.filter((e) => !ofPrimitive(e));
  return {
    overlap: checkOverlaps(mutexes),
    claims: checkClaims(mutexes, options.quorum),
    backing: checkBacking(mutexes, options.nodes, options.quorum, options.maxTtlMs),
    foreignTouch: checkForeignTouches(history, options.maxTtlMs),
    counter: checkCounters(history),
    liveness: checkLiveness(history),
    primitives: checkPrimitiveGrants(
      primitiveGrants(history.filter((e) => ofPrimitive(e) || e.f === "clock-offset")),
      CROSS_PROCESS_TOLERANCE_MS,
    ),
  };
}

/**
 * The grants of primitives, with the mode and permits their acquisitions recorded, on the harness
 * clock (each process's offset corrected, `clock-offset` events kept for it). Each window is cut
 * by its process's handshake bound at both ends: what remains was claimed at those instants
 * whatever the offset within the bound, so an anomaly among them is certain.
 */
function primitiveGrants(history: readonly HistoryEvent[]): PrimitiveGrant[] {
  const recorded = new Map<string, LockEvent>();
  for (const e of history) {
    if (e.f === "acquire" && e.type === "ok") recorded.set(`${e.process}/${(e as LockEvent).lock}`, e as LockEvent);
  }
  return grantsOf(history).flatMap((g) => {
    const acquired = recorded.get(`${g.process}/${g.lock}`);
    if (acquired?.mode === undefined) return [];
    return [
      {
        resource: g.resource,
        holder: `${g.process}/${g.lock}`,
        mode: acquired.mode,
        permits: acquired.permits,
        windows: g.windows
          .map((w) => ({ start: w.start + g.clockUncertaintyMs, end: w.end - g.clockUncertaintyMs }))
          .filter((w) => w.end > w.start),
      },
    ];
  });
}

/** The anomaly count of each checker. */
export function anomalyCounts(results: CheckResults): AnomalyCounts {
  return {
    overlap: results.overlap.anomalies.length,
    overClaim: results.claims.anomalies.length + results.backing.anomalies.length,
    foreignTouch: results.foreignTouch.anomalies.length,
    lostUnfenced: results.counter.unfenced.anomalies.length,
    lostFenced: results.counter.fenced ? results.counter.fenced.anomalies.length : null,
    overPermits: results.primitives.permits.filter((p) => p.anomaly !== undefined).length,
    readWrite: results.primitives.readWrite.length,
  };
}
