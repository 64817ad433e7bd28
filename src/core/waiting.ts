/**
 * The seam between the algorithm and how a client waits for a lock held elsewhere.
 *
 * The core makes attempts (a fan-out of `SET NX` to every node, decided by the quorum and the
 * validity left) and releases (compare-and-`DEL` on every node); a waiting strategy decides what
 * happens between attempts. Two strategies ship:
 * - `backoff` (`core/backoff-waiting.ts`): fan-outs with full-jitter backoff (or the caller's
 *   `retryDelay`) in between, the whole of waiting in node-redlock; the plain preset,
 *   `edge-redlock/core`, uses it;
 * - waiting in line at the resource's gate node (`waiting/`), the default of `edge-redlock`: one
 *   request per poll, turns taken first come first served, and a release that hands the lock
 *   over to the next waiter of its isolate.
 *
 * Safety never depends on the strategy: every grant is a quorum of nodes that set the keys with
 * our token, with more than `minValidityMs` of validity counted from before the first request that
 * could have set one (see `operations/acquire.ts`). A strategy may play some nodes' part in an
 * attempt or a release (the gate's poll, a hand-over), never the vote.
 * @module
 */
import type { NodeOutcomeKind } from "../base/report.js";
import type { Engine } from "./engine.js";
import type { FanOut, TaskContext } from "./fanout.js";
import type { Lock, LockOperations } from "./lock.js";
import type { AcquireRequest, ResolvedOptions } from "./options.js";

/** How clients wait for a held lock: a value, made once, shared by every client that uses it. */
export interface WaitingStrategy {
  /**
   * What the strategy keeps for one client. `nodeIdentities`: one per node, equal for two clients'
   * nodes only when they reach the same server (see `identity.ts`): state an isolate's clients
   * share must be keyed by them, never by a node's display id.
   */
  forClient(engine: Engine, nodeIdentities: readonly string[]): ClientWaiting;
}

/** A strategy at work for one client. */
export interface ClientWaiting {
  /**
   * `acquire()`: attempts until one is granted, or the attempts, the acquire deadline or the
   * caller's signal run out.
   * @param maxAttempts fan-outs allowed (1 for `tryAcquire()`).
   * @throws {LockHeldError | QuorumUnavailableError | ValidityExhaustedError | AcquireTimeoutError | AbortedError | ConfigurationError}
   */
  acquire(
    request: AcquireRequest,
    maxAttempts: number,
    signal: AbortSignal | undefined,
    operations: LockOperations,
  ): Promise<Lock>;
  /**
   * A release is about to send its requests: the part the strategy plays in it, or `undefined`
   * for a plain compare-and-`DEL` on every node.
   */
  release?(release: ReleaseRequest): ReleasePart | undefined;
}

/** A release about to be sent. */
export interface ReleaseRequest {
  readonly options: ResolvedOptions;
  readonly resources: readonly string[];
  readonly keys: readonly string[];
  readonly token: string;
  /** The lock released, when it is released through `lock.release()` (not by token). */
  readonly lock?: Lock | undefined;
}

/** A strategy's part in one release. */
export interface ReleasePart {
  /**
   * Node `index`'s request, when the strategy sends it instead of the plain compare-and-`DEL`
   * (which must then be part of it); `undefined` for the plain one.
   */
  task(index: number, context: TaskContext): Promise<NodeOutcomeKind> | undefined;
  /** The requests were sent at clock reading `sentAt`. */
  sent?(sentAt: number): void;
  /** The release was decided; `fan` still carries the answers of the nodes that were slower. */
  decided?(outcomes: readonly { readonly outcome: NodeOutcomeKind }[], fan: FanOut): void;
}
