/**
 * A held lock: its token, its deadline on the monotonic clock, and a signal that aborts before
 * the lock can be lost.
 * @module
 */
import { LockLostError, type RedlockError } from "./errors.js";
import type { RedlockOptions } from "./options.js";
import type { AttemptReport, NodeOutcome } from "./report.js";
import { backgroundTimeout } from "./signals.js";

/** What `release()` returns. It never throws because the lock already expired. */
export interface ReleaseResult {
  /** Nodes on which at least one of the lock's keys was ours and is now deleted. */
  readonly released: number;
  /** Every node's outcome, in configuration order (`pending` for a node still answering when the result was clear). */
  readonly nodes: readonly NodeOutcome[];
  /** The release as an attempt report. */
  readonly report: AttemptReport;
}

/** What `verify()` returns. */
export interface VerifyResult {
  /** Whether a quorum still holds the lock with more than `minValidityMs` left. */
  readonly held: boolean;
  /**
   * Conservative validity left, in ms: the smaller of the local deadline and what the nodes' own
   * PTTLs say (the quorum-th longest, less the round trip and drift). At most 0 when not held.
   */
  readonly remainingMs: number;
  readonly report: AttemptReport;
}

/** The operations a lock delegates to its client. Internal. */
export interface LockOperations {
  extend(lock: Lock, ttlMs: number, overrides: RedlockOptions | undefined): Promise<AttemptReport>;
  release(lock: Lock): Promise<ReleaseResult>;
  verify(lock: Lock, overrides: RedlockOptions | undefined): Promise<VerifyResult>;
}

/** Internal construction data of a {@link Lock}. */
export interface LockInit {
  readonly resources: readonly string[];
  readonly keys: readonly string[];
  readonly token: string;
  readonly ttlMs: number;
  readonly startedAt: number;
  readonly deadline: number;
  readonly minValidityMs: number;
  /** The `onLockLost` hook in force when the lock was acquired. */
  readonly onLost: (error: RedlockError) => void;
  readonly now: () => number;
  readonly report: AttemptReport;
  readonly operations: LockOperations;
  /** Per node: settles once the acquire request to that node has finished (release waits for it). */
  readonly acquireFinished: readonly Promise<void>[];
}

/**
 * A lock held on a quorum of nodes. Created by `Redlock.acquire()`, `tryAcquire()` and `using()`.
 *
 * Its deadline is `t0 + ttl - drift` on the monotonic clock, where `t0` was read just before the
 * first request of the winning attempt (or of the last extension) was sent.
 */
export class Lock {
  /** The locked resources, sorted. */
  readonly resources: readonly string[];
  /** The Redis keys (`keyPrefix + resource`), in the same order. */
  readonly keys: readonly string[];
  /** The random token (160 bits) that identifies this holder on every node. Stays the same across extensions. */
  readonly token: string;
  /** The report of the attempt that acquired the lock. */
  readonly acquireReport: AttemptReport;
  /**
   * Aborts, with a {@link LockLostError} as its reason, once the remaining validity falls below
   * `minValidityMs` (so before the lock can expire), when an extension finds the lock taken, or
   * when the lock is released. Pass it to the work the lock protects.
   */
  readonly signal: AbortSignal;
  /** Fencing token. Not available yet: always `undefined` (see the README). */
  readonly fence: undefined = undefined;

  readonly #controller = new AbortController();
  readonly #operations: LockOperations;
  readonly #now: () => number;
  readonly #onLost: (error: RedlockError) => void;
  readonly #minValidityMs: number;
  /** @internal */
  readonly ttlMs: number;
  /** @internal */
  readonly startedAt: number;
  /** @internal */
  readonly acquireFinished: readonly Promise<void>[];
  #deadline: number;
  #extensions = 0;
  #released = false;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /** @internal Use `Redlock.acquire()`. */
  constructor(init: LockInit) {
    this.resources = init.resources;
    this.keys = init.keys;
    this.token = init.token;
    this.ttlMs = init.ttlMs;
    this.startedAt = init.startedAt;
    this.acquireReport = init.report;
    this.acquireFinished = init.acquireFinished;
    this.#operations = init.operations;
    this.#now = init.now;
    this.#onLost = init.onLost;
    this.#minValidityMs = init.minValidityMs;
    this.#deadline = init.deadline;
    this.signal = this.#controller.signal;
    this.#scheduleLossTimer();
  }

  /**
   * Milliseconds of validity left, on the monotonic clock (negative once expired). On Cloudflare
   * Workers the clock only moves at I/O, so after CPU-bound work this over-estimates: see the README.
   */
  remainingMs(): number {
    return this.#deadline - this.#now();
  }

  /** Estimated wall-clock expiry (`Date.now()` epoch ms). `remainingMs()` is the authoritative value. */
  get expiresAt(): number {
    return Date.now() + this.remainingMs();
  }

  /** How many times the lock has been extended. */
  get extensions(): number {
    return this.#extensions;
  }

  /** Whether `release()` has been called. */
  get released(): boolean {
    return this.#released;
  }

  /**
   * Extend the lock to `ttlMs` from now on every node that still holds it (compare-and-PEXPIRE).
   * The token stays the same; the new deadline is measured from this call's own start.
   * @param ttlMs new TTL; @default the TTL the lock was acquired with
   * @throws {LockExpiredError} when the lock's validity has already run out or it was released (nothing is sent).
   * @throws {ExtensionLimitError} past `maxExtensions` or `maxHoldMs` (nothing is sent).
   * @throws {ExtendError} when no quorum extended it with enough validity, with per-node outcomes.
   */
  extend(ttlMs: number = this.ttlMs, overrides?: RedlockOptions): Promise<AttemptReport> {
    return this.#operations.extend(this, ttlMs, overrides);
  }

  /**
   * Re-check the lock on the nodes before a side effect: one round trip that reads each node's
   * PTTL for our token. Use it where the local clock cannot be trusted, as on Cloudflare Workers,
   * whose clock only advances at I/O. It does not close the gap between the check and the side
   * effect (only fencing does). Aborts `signal` when a quorum no longer holds the lock.
   */
  verify(overrides?: RedlockOptions): Promise<VerifyResult> {
    return this.#operations.verify(this, overrides);
  }

  /**
   * Release the lock on every node (compare-and-DEL). Idempotent; never throws, also not when the
   * lock already expired. Aborts `signal`.
   */
  release(): Promise<ReleaseResult> {
    this.#released = true;
    this.#clearTimer();
    if (!this.signal.aborted) this.#controller.abort(new LockLostError("the lock was released"));
    return this.#operations.release(this);
  }

  /** @internal Record a successful extension. */
  extended(deadline: number): void {
    this.#extensions++;
    // The extension set every key's TTL to the new value, shorter or longer: the keys now expire
    // by the new deadline, so the lock may claim no more than that.
    this.#deadline = deadline;
    this.#scheduleLossTimer();
  }

  /** @internal Abort the signal because the lock is, or may soon be, lost. Fires once. */
  lose(error: RedlockError): void {
    this.#clearTimer();
    if (this.signal.aborted) return;
    this.#controller.abort(error);
    this.#onLost(error);
  }

  #scheduleLossTimer(): void {
    this.#clearTimer();
    if (this.#released || this.signal.aborted) return;
    const delay = this.remainingMs() - this.#minValidityMs;
    this.#timer = backgroundTimeout(() => {
      // Timers can fire early or the deadline can have moved: re-check before declaring loss.
      if (this.remainingMs() - this.#minValidityMs > 0) return this.#scheduleLossTimer();
      this.lose(
        new LockLostError(
          `lock on ${this.resources.join(", ")} has less than ${this.#minValidityMs} ms of validity left and was not extended`,
        ),
      );
    }, delay);
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
