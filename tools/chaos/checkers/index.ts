/**
 * All checkers over one history.
 * @module
 */
import type { HistoryEvent } from "../history.js";
import { type BackingResult, checkBacking } from "./backing.js";
import { type ClaimResult, checkClaims } from "./claims.js";
import { type CounterResult, checkCounters } from "./counter.js";
import { checkForeignTouches, type ForeignTouchResult } from "./foreign-touch.js";
import { checkLiveness, type LivenessResult } from "./liveness.js";
import { checkOverlaps, type OverlapResult } from "./overlap.js";

/** Results of checkers 1–5. */
export interface CheckResults {
  readonly overlap: OverlapResult;
  readonly claims: ClaimResult;
  /** Checker 2 against the nodes' MONITOR log. */
  readonly backing: BackingResult;
  readonly foreignTouch: ForeignTouchResult;
  readonly counter: CounterResult;
  readonly liveness: LivenessResult;
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
}

/** Runs every checker. */
export function checkHistory(
  history: readonly HistoryEvent[],
  options: { nodes: number; quorum: number; maxTtlMs: number },
): CheckResults {
  return {
    overlap: checkOverlaps(history),
    claims: checkClaims(history, options.quorum),
    backing: checkBacking(history, options.nodes, options.quorum, options.maxTtlMs),
    foreignTouch: checkForeignTouches(history, options.maxTtlMs),
    counter: checkCounters(history),
    liveness: checkLiveness(history),
  };
}

/** The anomaly count of each checker. */
export function anomalyCounts(results: CheckResults): AnomalyCounts {
  return {
    overlap: results.overlap.anomalies.length,
    overClaim: results.claims.anomalies.length + results.backing.anomalies.length,
    foreignTouch: results.foreignTouch.anomalies.length,
    lostUnfenced: results.counter.unfenced.anomalies.length,
    lostFenced: results.counter.fenced ? results.counter.fenced.anomalies.length : null,
  };
}
