/**
 * Checker 2, validity conservativeness: after every grant and every extension, the deadline the
 * lock claims is no later than the real expiry of its key on a quorum of nodes.
 *
 * The client audits each node right after the operation returns: one atomic `MULTI GET PTTL`
 * straight to the redis-server (not through the fault proxy). The server ran it at an unknown
 * instant X between the send (`sentAt`) and the answer (`receivedAt`), and PTTL truncates to the
 * millisecond, so the key's real expiry E on that node satisfies
 *
 *     sentAt + pttl  ≤  E  <  receivedAt + pttl + 1.
 *
 * Which bound to compare with: an anomaly is reported only when it is certain, i.e. when the
 * claimed deadline is later than the *upper* bound of the quorum-th latest expiry (a node that did
 * not answer counts as +∞, a node not holding our token as −∞). The audit's round trip then only
 * hides over-claims smaller than itself; it can never invent one. The *lower* bound gives the
 * margin the library kept (`minMarginMs`: the smallest `quorum-th lower bound − claim`), reported so
 * a margin that shrinks towards zero is visible long before it turns into an anomaly.
 * @module
 */
import type { AuditEvent, HistoryEvent } from "../history.js";

/** One claim later than the quorum's real expiry. */
export interface OverClaim {
  readonly process: string;
  readonly resource: string;
  readonly lock: string;
  readonly after: AuditEvent["after"];
  /** Harness time of the audit event. */
  readonly t: number;
  readonly claimedDeadline: number;
  /** Upper bound of the quorum-th latest expiry (−∞ when fewer than a quorum hold the token). */
  readonly quorumExpiryUpperBound: number;
  /** How much later the claim is, ms (Infinity when no quorum holds the token at all). */
  readonly overClaimMs: number;
}

/** What checker 2 found. */
export interface ClaimResult {
  readonly audits: number;
  /** Audits in which fewer than a quorum of nodes answered, so nothing could be concluded. */
  readonly inconclusive: number;
  readonly anomalies: readonly OverClaim[];
  /**
   * Smallest margin between the quorum's earliest possible expiry (lower bound) and the claim, ms
   * (Infinity without audits). It can be negative by up to the audit's own round trip.
   */
  readonly minMarginMs: number;
  /** Smallest margin between the quorum's latest possible expiry (upper bound) and the claim: how close a claim came to an anomaly, ms. */
  readonly minUpperMarginMs: number;
}

/** Checks every audit in the history against the quorum. */
export function checkClaims(history: readonly HistoryEvent[], quorum: number): ClaimResult {
  const anomalies: OverClaim[] = [];
  let audits = 0;
  let inconclusive = 0;
  let minMarginMs = Number.POSITIVE_INFINITY;
  let minUpperMarginMs = Number.POSITIVE_INFINITY;
  for (const e of history) {
    if (e.f !== "audit") continue;
    const audit = e as AuditEvent;
    audits++;
    const upper = quorumBound(audit, quorum, "upper");
    const lower = quorumBound(audit, quorum, "lower");
    if (upper === Number.POSITIVE_INFINITY) {
      inconclusive++;
      continue;
    }
    if (Number.isFinite(lower)) minMarginMs = Math.min(minMarginMs, lower - audit.claimedDeadline);
    if (Number.isFinite(upper)) minUpperMarginMs = Math.min(minUpperMarginMs, upper - audit.claimedDeadline);
    if (audit.claimedDeadline > upper) {
      anomalies.push({
        process: audit.process,
        resource: audit.resource,
        lock: audit.lock,
        after: audit.after,
        t: audit.t,
        claimedDeadline: audit.claimedDeadline,
        quorumExpiryUpperBound: upper,
        overClaimMs: audit.claimedDeadline - upper,
      });
    }
  }
  return { audits, inconclusive, anomalies, minMarginMs, minUpperMarginMs };
}

/**
 * The quorum-th latest expiry over the audited nodes, using each node's upper or lower bound.
 * A silent node is +∞ for the upper bound (it may hold the key forever, for all we know) and −∞
 * for the lower one; a node that does not hold the token is −∞ for the lower bound and its
 * answer's arrival for the upper one.
 */
export function quorumBound(audit: AuditEvent, quorum: number, which: "upper" | "lower"): number {
  const expiries = audit.nodes.map((n) => {
    if (n.holds === null) return which === "upper" ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY;
    // Our key was gone when the node ran the read: it expired (or was never set) no later than the
    // answer. That refutes a claim reaching past the answer, not one that had already ended (a
    // client paused between its grant and its audit reads the nodes after its own deadline).
    if (!n.holds || n.pttl === undefined || n.pttl < 0) {
      return which === "upper" && n.receivedAt !== undefined ? n.receivedAt : Number.NEGATIVE_INFINITY;
    }
    return which === "upper" ? n.receivedAt + n.pttl + 1 : n.sentAt + n.pttl;
  });
  expiries.sort((a, b) => b - a);
  return expiries[quorum - 1] ?? Number.NEGATIVE_INFINITY;
}
