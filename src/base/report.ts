/**
 * Plain, serializable records of what each node said. Errors, hooks and results all carry them.
 * @module
 */

/**
 * What one node answered in one operation.
 * - `acquired` / `extended` / `released` / `verified`: the node did what was asked.
 * - `held`: the key is held by another token (acquire), or no longer holds ours (extend).
 * - `not-held`: release found none of our keys there (already expired or never set).
 * - `error`: transport failure, HTTP error status, unparsable answer or Redis error reply.
 * - `timeout`: no answer within the per-request deadline.
 * - `aborted`: the caller's AbortSignal fired first.
 * - `pending`: still in flight when the operation settled early (a quorum was already decided).
 *
 * Fenced operations (see `src/fencing/`) add:
 * - `fenced`: the node raised the fence counters to the proposed token (phase 2 acknowledged).
 * - `outbid`: the node's fence counter was already at or above the proposed token (phase 2).
 * - `no-marker`: the node has no incarnation marker: a fresh node or one that lost its data.
 *   It grants nothing until it is initialised or quarantined and repaired.
 * - `quarantined`: the node lost its data and sits out its quarantine (at least the longest TTL).
 * - `needs-repair`: the node's quarantine is over but its fence counter for this lock's resources
 *   has not been restored from a quorum yet.
 * - `repaired`: a repair raised the node's fence counters and readmitted it for those resources.
 * - `initialized`: a one-time fencing initialisation marked the node, or a reset of the cluster
 *   fingerprint set it (`Redlock.resetClusterFingerprint()`).
 */
export type NodeOutcomeKind =
  | "acquired"
  | "extended"
  | "released"
  | "verified"
  | "held"
  | "not-held"
  | "error"
  | "timeout"
  | "aborted"
  | "pending"
  | "fenced"
  | "outbid"
  | "no-marker"
  | "quarantined"
  | "needs-repair"
  | "repaired"
  | "initialized";

/** One node's answer in one operation. */
export interface NodeOutcome {
  /** The node's id (by default its URL, never its token). */
  readonly node: string;
  /** What the node answered (see {@link NodeOutcomeKind}). */
  readonly outcome: NodeOutcomeKind;
  /** Time from the start of the operation to this node's answer, in milliseconds (absent while pending). */
  readonly latencyMs?: number;
  /** HTTP requests sent to this node for this operation (2 when EVALSHA fell back to EVAL). */
  readonly requests: number;
  /** HTTP status, when the node answered with an error status. */
  readonly status?: number;
  /** The error, for `error`, `timeout` and `aborted`. */
  readonly error?: Error;
}

/** The kind of operation an attempt belongs to. */
export type Operation = "acquire" | "extend" | "release" | "inspect" | "verify";

/** One attempt of one operation on all nodes. */
export interface AttemptReport {
  /** The operation the attempt belongs to. */
  readonly operation: Operation;
  /** 1-based attempt number within the operation. */
  readonly attempt: number;
  /** The resource names, sorted. */
  readonly resources: readonly string[];
  /** Votes needed. */
  readonly quorum: number;
  /** Nodes that said yes when the attempt settled. */
  readonly votes: number;
  /** Time from just before the first send until the attempt settled, in milliseconds. */
  readonly elapsedMs: number;
  /** Validity left when the attempt settled (acquire and extend), in milliseconds; may be negative. */
  readonly validityMs?: number;
  /** Whether the attempt succeeded. */
  readonly ok: boolean;
  /** Every node's outcome, in the order the nodes were configured. */
  readonly nodes: readonly NodeOutcome[];
  /** HTTP requests sent for this attempt so far (Workers count each as a subrequest). */
  readonly requests: number;
  /**
   * Polls of the gate node made while waiting since the previous attempt (one request each; also
   * subrequests on Workers). Absent when there were none.
   */
  readonly polls?: number;
}
