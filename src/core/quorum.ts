/**
 * The arithmetic of the Redlock algorithm: quorum size, clock drift, validity and how an attempt
 * is decided. Pure functions, no I/O.
 * @module
 */
import type { NodeOutcomeKind } from "../base/report.js";

/** A strict majority of `nodeCount`: `floor(N/2) + 1`. */
export function majority(nodeCount: number): number {
  return Math.floor(nodeCount / 2) + 1;
}

/**
 * The drift allowance for a TTL: `floor(ttl * driftFactor) + 2`. The 2 ms cover Redis's 1 ms
 * expiry resolution plus rounding, as on the Redlock page.
 */
export function driftMs(ttlMs: number, driftFactor: number): number {
  return Math.floor(ttlMs * driftFactor) + 2;
}

/**
 * Validity left after an operation that started at `startedAt` (read just before the first send)
 * and was decided at `decidedAt`: `ttl - elapsed - drift`. May be negative.
 */
export function validityMs(ttlMs: number, startedAt: number, decidedAt: number, driftFactor: number): number {
  return ttlMs - (decidedAt - startedAt) - driftMs(ttlMs, driftFactor);
}

/** The state of a vote: `undecided` until a quorum is reached or has become impossible. */
export type Decision = "granted" | "refused" | "undecided";

/**
 * Decide a vote from the answers so far. Granted once `quorum` nodes said yes; refused as soon as
 * the nodes that can still say yes are too few, `N - no < quorum`. Both fire on every split, so
 * an even N (a 2-2 split on four nodes) cannot hang.
 */
export function decide(yes: number, no: number, nodeCount: number, quorum: number): Decision {
  if (yes >= quorum) return "granted";
  if (nodeCount - no < quorum) return "refused";
  return "undecided";
}

/** Outcomes that mean the node did not answer usefully (as opposed to a definite answer). */
export function isFailure(outcome: NodeOutcomeKind): boolean {
  return outcome === "error" || outcome === "timeout" || outcome === "aborted";
}

/**
 * Whether why a refused vote was refused depends on the nodes that had not answered when it was
 * decided (`pending`): held on them it would be contention, failed it would be an outage. Its
 * reason must then wait for their answers (a down node refusing at once decides the vote before
 * the nodes that hold the lock have said so).
 */
export function reasonPending(outcomes: readonly NodeOutcomeKind[], quorum: number): boolean {
  if (!outcomes.includes("pending")) return false;
  const held = refusalReason(
    outcomes.map((o) => (o === "pending" ? "held" : o)),
    quorum,
  );
  return (
    held !==
    refusalReason(
      outcomes.map((o) => (o === "pending" ? "error" : o)),
      quorum,
    )
  );
}

/**
 * Why an acquisition attempt was refused: `held` when the nodes holding another token alone rule
 * out a quorum (contention), otherwise `unavailable` (errors and timeouts were decisive).
 */
export function refusalReason(outcomes: readonly NodeOutcomeKind[], quorum: number): "held" | "unavailable" {
  const held = outcomes.filter((o) => o === "held").length;
  return outcomes.length - held < quorum ? "held" : "unavailable";
}
