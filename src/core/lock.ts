/**
 * A held lock: its token, its deadline on the monotonic clock, the options it was acquired with,
 * and a signal that aborts before the lock can be lost.
 * @module
 */
import { LockLostError, type RedlockError } from "../base/errors.js";
import type { AttemptReport, NodeOutcome } from "../base/report.js";
import { backgroundTimeout } from "../base/signals.js";
import { type ExtensionSent, extensionDeadline } from "./extension-claims.js";
import type { AcquireFan } from "./fanout.js";
import type { RedlockOptions, ResolvedOptions } from "./options.js";

/** An extension whose requests may still land, and the extensions whose requests overlapped its own. */
interface InFlightExtension extends ExtensionSent {
  readonly overlapping: ExtensionSent[];
}

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
   * PTTLs say (the quorum-th longest, less the round trip and drift). At most 0 when not held,
   * and always a finite number.
   */
  readonly remainingMs: number;
  /** The verification as an attempt report. */
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
  /** The options of the acquisition, kept for every later operation on the lock. */
  readonly options: ResolvedOptions;
  readonly report: AttemptReport;
  readonly operations: LockOperations;
  /** The winning attempt's fan-out: release cleans up after its requests that had no answer. */
  readonly acquireFan: AcquireFan;
  /** The fencing token, for a lock acquired with `fencing: true`. */
  readonly fence?: string | undefined;
  /** See {@link Lock.gateLeadMs}. */
  readonly gateLeadMs?: number | undefined;
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
  /**
   * The random token (160 bits) that identifies this holder on every node: made for this grant
   * alone and never given to another holder. Stays the same across extensions. It is a capability
   * (`Redlock.release(resources, token)` accepts it): do not log or share it.
   */
  readonly token: string;
  /** The report of the attempt that acquired the lock. */
  readonly acquireReport: AttemptReport;
  /**
   * The options the lock was acquired with (the client's, merged with the call's). Every later
   * extension, automatic extension, verification and release uses them; `extend(ttl, overrides)`
   * may override them for that one call.
   */
  readonly options: Readonly<ResolvedOptions>;
  /**
   * The fencing token of this grant, as a decimal string (at most 2^53 - 1), when the lock was
   * acquired with `fencing: true`; `undefined` otherwise. Unique per grant and larger than the
   * token of every grant of the same resources that returned before this one began. It stays the
   * same across extensions. Compare tokens as integers (`BigInt(fence)` or `compareFences`).
   */
  readonly fence: string | undefined;
  /** The TTL the lock was acquired with, in milliseconds: the default of `extend()`. */
  readonly ttlMs: number;
  /** @internal Clock reading before the first send of the winning attempt. */
  readonly startedAt: number;
  /** @internal */
  readonly acquireFan: AcquireFan;
  /**
   * @internal How long before the grant the gate node already held our key, beyond the grant's
   * own round trip: the round trip to the other nodes after a poll took the gate (0 otherwise).
   * The release tells the gate, which learns holds as if the others had been asked with it.
   */
  readonly gateLeadMs: number;

  readonly #operations: LockOperations;
  #controller: AbortController | undefined;
  #lostReason: RedlockError | undefined;
  #deadline: number;
  readonly #holdLimit: number;
  #lastTtlMs: number;
  #extensions = 0;
  /** Extensions sent, in order; the number of the last one granted; those whose requests may still land. */
  #extensionsSent = 0;
  #lastGranted = 0;
  /** Made by the first extension: most locks are never extended. */
  #extensionsInFlight: Map<number, InFlightExtension> | undefined;
  /** The least TTL of an extension request whose fate is unknown (see `extension-claims.ts`). */
  #stragglerTtlMs = Number.POSITIVE_INFINITY;
  #released = false;
  #release: Promise<ReleaseResult> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /** @internal Use `Redlock.acquire()`. */
  constructor(init: LockInit) {
    this.resources = init.resources;
    this.keys = init.keys;
    this.token = init.token;
    this.ttlMs = init.ttlMs;
    this.startedAt = init.startedAt;
    this.acquireReport = init.report;
    this.acquireFan = init.acquireFan;
    this.fence = init.fence;
    this.gateLeadMs = init.gateLeadMs ?? 0;
    this.options = init.options;
    this.#operations = init.operations;
    // maxHoldMs caps what the lock claims, not only its extensions: from the grant's own start.
    this.#holdLimit = init.startedAt + (init.options.maxHoldMs ?? Number.POSITIVE_INFINITY);
    this.#deadline = Math.min(init.deadline, this.#holdLimit);
    this.#lastTtlMs = init.ttlMs;
    // The loss timer exists only for someone who listens: the signal (created on first use) or
    // the onLockLost hook. A lock nobody watches costs no timer.
    if (this.options.onLockLost) this.#scheduleLossTimer();
  }

  /**
   * Aborts, with a {@link LockLostError} as its reason, once the remaining validity falls below
   * `minValidityMs` (so before the lock can expire), when an extension finds the lock taken, or
   * when the lock is released. Pass it to the work the lock protects.
   *
   * It is driven by a timer: a process that is paused (a long GC, a frozen isolate, a blocked
   * event loop) runs its own code before the timer, so check {@link Lock.assertHeld} right before
   * a side effect as well.
   */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#lostReason !== undefined) this.#controller.abort(this.#lostReason);
      else if (this.#released) this.#controller.abort(new LockLostError("the lock was released"));
      else this.#scheduleLossTimer();
    }
    return this.#controller.signal;
  }

  /**
   * Milliseconds of validity left, on the monotonic clock (negative once expired). On Cloudflare
   * Workers the clock only moves at I/O, so after CPU-bound work this over-estimates: see the README.
   */
  remainingMs(): number {
    return this.#deadline - this.options.clock.now();
  }

  /**
   * A local check to make right before a side effect: throws a {@link LockLostError} unless the
   * lock was not released, not lost, and has more than `marginMs` of validity left on the local
   * clock. It sends nothing; it is as good as the clock it reads (see {@link Lock.verify} where the
   * clock cannot be trusted, and fencing for a guarantee that survives pauses).
   * @param marginMs validity the side effect needs, in milliseconds. @default `options.minValidityMs`
   * @throws {LockLostError}
   */
  assertHeld(marginMs: number = this.options.minValidityMs): void {
    const what = this.resources.join(", ");
    if (this.#released) throw new LockLostError(`lock on ${what} was released`);
    if (this.#lostReason !== undefined) throw this.#lostReason;
    const remaining = this.remainingMs();
    if (remaining <= marginMs) {
      throw new LockLostError(
        `lock on ${what} has ${Math.max(0, Math.floor(remaining))} ms of validity left, not more than the ${marginMs} ms asked for`,
      );
    }
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
   * The token stays the same; the new deadline is measured from this call's own start and
   * replaces the old one, shorter or longer: the keys now expire `ttlMs` after the extension.
   * @param ttlMs new TTL; @default the TTL the lock was acquired with
   * @param overrides options for this call only; the lock's own {@link Lock.options} otherwise.
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
   * Release the lock on every node (compare-and-DEL). Sends at most once: a later call sends
   * nothing and returns the first call's result. Never throws, also not when the lock already
   * expired. Aborts `signal`.
   */
  release(): Promise<ReleaseResult> {
    if (this.#release !== undefined) return this.#release;
    this.#released = true;
    this.#clearTimer();
    // The release reason is built only if someone holds the signal: no error on the success path.
    if (this.#controller !== undefined && !this.#controller.signal.aborted) {
      this.#controller.abort(new LockLostError("the lock was released"));
    }
    this.#release = this.#operations.release(this);
    return this.#release;
  }

  /** @internal Whether the lock was found lost, or may soon be (see {@link Lock.signal}). */
  get lost(): boolean {
    return this.#lostReason !== undefined;
  }

  /** @internal The TTL the keys were last set with: at acquisition, or by the last extension. */
  get lastTtlMs(): number {
    return this.#lastTtlMs;
  }

  /**
   * @internal An extension is about to send its requests. From now on they may land on any node,
   * and a key they reach expires `ttlMs` after they land: the lock claims no more than that until
   * the extension's answers say otherwise. Returns the extension's number, for the calls below.
   */
  extensionStarted(startedAt: number, ttlMs: number): number {
    const sent: InFlightExtension = { startedAt, ttlMs, overlapping: [] };
    // Extensions whose requests overlap in time may land on a node in either order.
    this.#extensionsInFlight ??= new Map();
    for (const other of this.#extensionsInFlight.values()) {
      other.overlapping.push(sent);
      sent.overlapping.push(other);
    }
    const number = ++this.#extensionsSent;
    this.#extensionsInFlight.set(number, sent);
    this.capDeadline(extensionDeadline(sent, [], Number.POSITIVE_INFINITY, this.options.driftFactor));
    return number;
  }

  /**
   * @internal Extension `number` was granted by a quorum from `startedAt`. Its deadline replaces
   * the lock's, shorter or longer, unless an extension sent after it was granted first: late
   * answers of an older extension never raise the claim. Either way it stays within what the
   * extensions whose requests overlapped its own may have set (see `extension-claims.ts`).
   */
  extended(number: number, startedAt: number, ttlMs: number): void {
    const overlapping = this.#extensionsInFlight?.get(number)?.overlapping ?? [];
    const deadline = Math.min(
      extensionDeadline({ startedAt, ttlMs }, overlapping, this.#stragglerTtlMs, this.options.driftFactor),
      this.#holdLimit,
    );
    this.#extensions++;
    if (number < this.#lastGranted) {
      this.capDeadline(deadline);
      return;
    }
    this.#lastGranted = number;
    this.#lastTtlMs = ttlMs;
    this.#deadline = deadline;
    if (this.#controller !== undefined || this.options.onLockLost) this.#scheduleLossTimer();
  }

  /**
   * @internal Every request of extension `number` has finished (it is granted or refused by then).
   * One whose fate stayed unknown (a timeout, a transport failure) may still land later: its TTL
   * bounds every later claim.
   */
  extensionFinished(number: number, fateUnknown: boolean): void {
    const sent = this.#extensionsInFlight?.get(number);
    this.#extensionsInFlight?.delete(number);
    if (fateUnknown && sent !== undefined) this.#stragglerTtlMs = Math.min(this.#stragglerTtlMs, sent.ttlMs);
  }

  /** @internal Never claim beyond `deadline` (an extension that failed may still have set some keys). */
  capDeadline(deadline: number): void {
    if (deadline >= this.#deadline) return;
    this.#deadline = deadline;
    if (this.#controller !== undefined || this.options.onLockLost) this.#scheduleLossTimer();
  }

  /** @internal Abort the signal because the lock is, or may soon be, lost. Fires once. */
  lose(error: RedlockError): void {
    this.#clearTimer();
    if (this.#lostReason !== undefined || this.#released) return;
    this.#lostReason = error;
    this.#controller?.abort(error);
    try {
      this.options.onLockLost?.({ resources: this.resources, error });
    } catch {
      // A hook must never break locking.
    }
  }

  #scheduleLossTimer(): void {
    this.#clearTimer();
    if (this.#released || this.#lostReason !== undefined) return;
    const minValidityMs = this.options.minValidityMs;
    this.#timer = backgroundTimeout(() => {
      // Timers can fire early or the deadline can have moved: re-check before declaring loss.
      if (this.remainingMs() - minValidityMs > 0) return this.#scheduleLossTimer();
      this.lose(
        new LockLostError(
          `lock on ${this.resources.join(", ")} has less than ${minValidityMs} ms of validity left and was not extended`,
        ),
      );
    }, this.remainingMs() - minValidityMs);
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
