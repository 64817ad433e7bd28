/**
 * An independent check of what a lock claims against what the nodes hold. It reads each node's
 * key with plain `fetch` (one `GET` + `PTTL` script per node, not the library's code) right after
 * a grant or an extension, and compares the lock's claimed deadline with the real expiry of its
 * keys on a quorum.
 *
 * Which bound is safe: a node ran the script at some moment between sending and receiving, so the
 * key expires no later than `receivedAt + pttl`. Taking that latest possible expiry per node, the
 * quorum-th latest of them is an upper bound on how long a quorum still holds the lock. A claimed
 * deadline beyond it is a real over-claim, never an artefact of the audit's own round trip.
 */
import type { Lock } from "../../../src/index.js";

export type Endpoint = { url: string; token: string };

/** What one audit found. `violation` is set when the claim outlives the keys on a quorum. */
export interface ClaimAudit {
  /** The lock's claimed deadline, on `performance.now()`. */
  readonly claimedDeadline: number;
  /** Upper bound of the keys' expiry on a quorum, on `performance.now()` (-Infinity: no quorum holds them). */
  readonly quorumExpiry: number;
  /** Per node: the latest moment its key can expire (-Infinity: the key is not ours; +Infinity: no answer). */
  readonly nodeExpiries: readonly number[];
  readonly violation: string | undefined;
}

/** A node that does not answer within this long counts as holding the key for ever (no false alarm). */
const READ_TIMEOUT_MS = 1500;

const SCRIPT = `local out = {}
for i, key in ipairs(KEYS) do
  out[#out + 1] = redis.call("GET", key) or false
  out[#out + 1] = redis.call("PTTL", key)
end
return out`;

/** Read one node's keys: per key its value (null when absent) and PTTL. */
async function readKeys(
  endpoint: Endpoint,
  keys: readonly string[],
): Promise<{ at: number; entries: [string | null, number][] }> {
  const response = await fetch(endpoint.url, {
    method: "POST",
    headers: { authorization: `Bearer ${endpoint.token}`, "content-type": "application/json" },
    body: JSON.stringify(["EVAL", SCRIPT, keys.length, ...keys]),
    signal: AbortSignal.timeout(READ_TIMEOUT_MS),
  });
  const at = performance.now();
  const body = (await response.json()) as { result?: (string | number | null)[]; error?: string };
  if (!Array.isArray(body.result)) throw new Error(`audit read failed: ${body.error ?? response.status}`);
  const entries: [string | null, number][] = [];
  for (let i = 0; i < body.result.length; i += 2) {
    entries.push([(body.result[i] as string | null) ?? null, body.result[i + 1] as number]);
  }
  return { at, entries };
}

/**
 * Audit `lock` now (call it right after the grant or extension returned). `quorum` defaults to
 * the lock's own.
 */
export async function auditClaim(
  endpoints: readonly Endpoint[],
  lock: Lock,
  quorum = lock.options.quorum,
): Promise<ClaimAudit> {
  const claimedDeadline = performance.now() + lock.remainingMs();
  const reads = await Promise.all(endpoints.map((e) => readKeys(e, lock.keys).catch(() => undefined)));
  const nodeExpiries = reads.map((read) => {
    // Unknown (a slow or dead node): it may hold the key for ever. Never an anomaly of its own.
    if (!read) return Number.POSITIVE_INFINITY;
    // Every key must be ours; the lock expires with its first key.
    let expiry = Number.POSITIVE_INFINITY;
    for (const [value, pttl] of read.entries) {
      if (value !== lock.token || pttl < 0) return Number.NEGATIVE_INFINITY;
      // +1: PTTL is rounded down to whole milliseconds.
      expiry = Math.min(expiry, read.at + pttl + 1);
    }
    return expiry;
  });
  const quorumExpiry = [...nodeExpiries].sort((a, b) => b - a)[quorum - 1] ?? Number.NEGATIVE_INFINITY;
  const violation =
    claimedDeadline > quorumExpiry
      ? `lock on ${lock.resources.join(", ")} claims ${Math.round(claimedDeadline - quorumExpiry)} ms beyond the keys on a quorum (claimed ${lock.remainingMs().toFixed(0)} ms left)`
      : undefined;
  return { claimedDeadline, quorumExpiry, nodeExpiries, violation };
}

/** Audit and fail the test on a violation. */
export async function expectClaimHolds(endpoints: readonly Endpoint[], lock: Lock): Promise<void> {
  if (lock.remainingMs() <= 0) return;
  const audit = await auditClaim(endpoints, lock);
  if (audit.violation) throw new Error(audit.violation);
}
