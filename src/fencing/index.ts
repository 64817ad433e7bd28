/**
 * `edge-redlock/fencing`: quorum fencing tokens for Redlock. A token per grant (`lock.fence`),
 * unique and increasing in real-time order across grants of the same resources, for a protected
 * store to reject stale writers; and the server-enforced quarantine of nodes that lost their data.
 * A bundle that never imports this module carries none of it. See `docs/fencing.md` for the
 * user's view and `attempt.ts` for the arguments.
 *
 * @example
 * ```ts
 * import { Redlock } from "edge-redlock";
 * import { fencing, initializeFencing } from "edge-redlock/fencing";
 *
 * const redlock = new Redlock({ nodes, fencing });
 * await initializeFencing(redlock); // once per deployment, never again
 * const lock = await redlock.acquire("invoice:42", 10_000);
 * lock.fence; // "17": compare as integers (BigInt or compareFences)
 * ```
 * @module edge-redlock/fencing
 */
import { InvalidArgumentError } from "../base/errors.js";
import type { FencedAttempts } from "../core/operations/acquire.js";
import type { Fencing } from "../core/options.js";
import type { Redlock } from "../core/redlock.js";
import { attemptFenced, attemptFencedWrite } from "./acquire.js";
import { assertQuarantineCovers } from "./arithmetic.js";
import { type InitializeFencingResult, initializeFencing as initializeNodes } from "./initialize.js";

export type { Script } from "../core/scripts/script.js";
export type { FencedRefusal } from "./attempt.js";
export { compareFences, FENCED_SQL_UPDATE, fencedWriteScript } from "./guard.js";
export type { InitializeFencingResult } from "./initialize.js";
export { RESERVED_KEY_PART } from "./keys.js";
export { MAX_FENCE } from "./lua.js";

// `attemptWrite`: the fenced attempt of a read-write lock's write lock, which the read-write lock
// finds on this value (the primitives never import this module).
const fencedAttempts: FencedAttempts & { readonly attemptWrite: typeof attemptFencedWrite } = {
  kind: "fencing",
  attempt: attemptFenced,
  attemptWrite: attemptFencedWrite,
  checkExtension: (ttlMs, o) => assertQuarantineCovers(ttlMs, o.quarantineMs, o.driftFactor),
};

/**
 * The value of the `fencing` option (of the client, or of one `acquire()`, `tryAcquire()` or
 * `using()` call): every lock acquired with it carries a fencing token, `lock.fence`, and so does
 * every write lock of a `ReadWriteLock` on such a client (one sequence per read-write lock, its
 * own; read locks carry none). Costs a second round trip per acquisition. A fenced mutex waits in
 * line as a plain one does, and takes its turn with a fenced attempt; a fenced write lock waits
 * with backoff.
 * Fenced acquisitions refuse to run (`FencingError` `FENCING_UNINITIALIZED`) until
 * {@link initializeFencing} has run once for the deployment.
 */
export const fencing: Fencing = fencedAttempts;

/** Options of {@link initializeFencing}. */
export interface InitializeFencingOptions {
  /** The namespace to initialise. @default the client's `keyPrefix` */
  readonly keyPrefix?: string | undefined;
  /** Deadline of each node request, in milliseconds. @default the larger of the client's `requestTimeoutMs` and 2000 */
  readonly requestTimeoutMs?: number | undefined;
}

/**
 * Mark every node of a brand-new deployment for fencing, once. Fenced acquisitions refuse to run
 * (`FencingError` `FENCING_UNINITIALIZED`) until this has run; afterwards a node found without its
 * marker is a node that lost its data, and is quarantined and repaired, never re-initialised.
 * @throws {FencingError} `FENCING_INIT_REFUSED` when a node already carries a marker (the
 * deployment was initialised before) or cannot be reached (all must answer).
 * @throws {InvalidArgumentError} when `redlock` is not a client (a node list, say).
 */
export async function initializeFencing(
  redlock: Redlock,
  options?: InitializeFencingOptions,
): Promise<InitializeFencingResult> {
  const engine = (redlock as Partial<Redlock> | undefined)?.engine;
  if (typeof engine?.resolve !== "function") {
    throw new InvalidArgumentError("initializeFencing(redlock) takes a Redlock client, whose nodes it initialises");
  }
  const o = engine.resolve(undefined, 10_000);
  return initializeNodes({
    nodes: redlock.nodes,
    keyPrefix: options?.keyPrefix ?? o.keyPrefix,
    clock: o.clock,
    requestTimeoutMs: options?.requestTimeoutMs ?? Math.max(o.requestTimeoutMs, 2000),
  });
}
