/**
 * What a lock may claim after an extension, when other extensions of the same lock may still
 * land on the nodes. Pure arithmetic.
 *
 * Each node keeps the TTL of the last compare-and-`PEXPIRE` that reached it, shorter or longer.
 * An extension E sent at `t` with `ttl` sets a key, wherever it lands, to expire no sooner than
 * `t + ttl`. A request of another extension M that lands after E's on a node sets that key to
 * expire no sooner than `max(t_M, t) + ttl_M`: after E's own send, and after M's. So E's answers
 * back a claim up to the least of these, less the drift of each TTL. An extension request whose
 * fate is unknown (a timeout, a transport failure) may land at any time: its TTL bounds every
 * later claim of the lock (`stragglerTtlMs`).
 * @module
 */
import { driftMs } from "./quorum.js";

/** An extension of a lock: when its first request was sent (clock reading), and its TTL. */
export interface ExtensionSent {
  readonly startedAt: number;
  readonly ttlMs: number;
}

/**
 * The deadline that extension `own`'s quorum backs, given the extensions of the same lock whose
 * requests may still land (`others`, started before or after it) and the least TTL of a request
 * of unknown fate (`Infinity` for none).
 */
export function extensionDeadline(
  own: ExtensionSent,
  others: Iterable<ExtensionSent>,
  stragglerTtlMs: number,
  driftFactor: number,
): number {
  const until = (startedAt: number, ttlMs: number) => startedAt + ttlMs - driftMs(ttlMs, driftFactor);
  let deadline = until(own.startedAt, own.ttlMs);
  for (const other of others)
    deadline = Math.min(deadline, until(Math.max(other.startedAt, own.startedAt), other.ttlMs));
  if (stragglerTtlMs !== Number.POSITIVE_INFINITY) deadline = Math.min(deadline, until(own.startedAt, stragglerTtlMs));
  return deadline;
}
