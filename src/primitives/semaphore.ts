/**
 * A counting semaphore across the quorum: `permits` slots, each a Redlock mutex of its own (one key
 * per slot, `SET NX PX` on every node, granted by a quorum with validity left, counted from before
 * the first send, exactly as a lock). A permit is one slot held.
 *
 * Safe by construction: two holders of one slot would need two quorums that both set its key,
 * and any two quorums share a node, whose `SET NX` let only one of them in. So there are never
 * more holders than slots, whatever the node failures within the mutex's failure model. A count per
 * node (admit where fewer than k hold on a majority) is not safe: each holder needs q of the N
 * nodes and each node admits k, so ⌊N·k/q⌋ holders can be admitted at once (k = 2, N = 3: three).
 *
 * Finding a free slot, and what it costs (N nodes, requests counted per acquisition):
 * - first a fan-out on one slot picked at random among those this instance does not hold: N
 *   requests, one round trip, as a mutex (a random start spreads callers over the slots);
 * - when that slot is held, the caller joins the semaphore's line (see `semaphore-line.ts`): one
 *   request to its gate node answers its rank and which slots are free there, and when its rank is
 *   below the number of free slots, the free slot at its rank gets the next fan-out: 2N + 1
 *   requests in all (and, in the background, one more to leave the line);
 * - while every slot is held, or more wait ahead than slots are free, a waiter polls the line (one
 *   request) at most 10 times a second, further apart as the wait grows when the request budget
 *   would not last; the first in line also reads another node once in 4 polls that found nothing
 *   free, so a key the gate keeps alone (a failed attempt's) does not trap the line.
 * `maxAttempts` bounds the fan-outs, `acquireTimeoutMs`, the signal and `requestBudget` (with
 * room kept for the take, the release and leaving the line) the whole call; a waiter that does not
 * move up the line for as long as the backoff would have waited between `maxAttempts` attempts
 * gives up (`LockHeldError`).
 *
 * Fairness: waiters that found their first pick held are served first come, first served, across
 * isolates. A caller's first try does not queue (as a mutex's first fan-out), so a caller that
 * arrives while a permit is free takes it even with waiters in line whose next poll has not come;
 * but while its client has seen the line busy lately (`isHot`), a caller joins the line at once,
 * so a client that releases a permit and takes another right away goes to the back.
 * When the line's gate node does not answer, the call falls back to the backoff of
 * `retryBaseDelayMs` / `retryMaxDelayMs` (or `retryDelay`), probing one node per round, the next in
 * turn; `tryAcquire()` never waits in line (a try, one probe, a try of a slot free there). Safety
 * never depends on the line. Permits are not fenced: a fence orders the holders of one lock, and
 * permits are held side by side by design; the `fencing` option does not apply to them.
 * @module
 */
import { InvalidArgumentError, LockHeldError, type RedlockError } from "../base/errors.js";
import type { AttemptReport } from "../base/report.js";
import { sleep } from "../base/signals.js";
import { fullJitterDelay } from "../core/backoff.js";
import { acquireTimeout, checkBudget, retryDelay, stopAfter } from "../core/backoff-waiting.js";
import type { Engine } from "../core/engine.js";
import { endCall } from "../core/fanout.js";
import type { Lock, LockOperations } from "../core/lock.js";
import { abortedError, attemptAcquire, failureError } from "../core/operations/acquire.js";
import type { AcquireRequest, ResolvedOptions } from "../core/options.js";
import { refusalReason } from "../core/quorum.js";
import type { AcquireOptions, Redlock, UsingOptions } from "../core/redlock.js";
import {
  type Call,
  lockOperations,
  prepareCall,
  primitiveKey,
  refuseNested,
  runUsing,
  validateClient,
  validateName,
} from "./calls.js";
import { probeOnNode } from "./node-operations.js";
import { isHot, lineKeys, waitInLine } from "./semaphore-line.js";

/** The most permits a {@link Semaphore} may have: a probe reads every slot key in one request. */
export const MAX_PERMITS = 256;

/**
 * A counting semaphore: at most `permits` holders at once across the quorum, each holding a
 * {@link Lock} of its own (its own token, extend, release, signal, remainingMs).
 *
 * Clients that share a semaphore must give it the same name and `keyPrefix`; one that gives more
 * permits uses the extra slots too, so there are at most as many holders as the largest number of
 * permits in use (during a rollout that changes it, the larger).
 *
 * @example
 * ```ts
 * const upstream = new Semaphore(redlock, "upstream-api", 3);
 * await upstream.using(10_000, async (signal) => callUpstream({ signal }));
 * ```
 */
export class Semaphore {
  /** The semaphore's name: its slot keys are `keyPrefix + "__edge-redlock__:semaphore:…"`. */
  readonly name: string;
  /** How many holders it admits at once. */
  readonly permits: number;
  readonly #redlock: Redlock;
  readonly #engine: Engine;
  readonly #operations: LockOperations;
  /** This instance's permits by slot key, while they may be held: a first try skips their slots. */
  readonly #own = new Map<string, Lock>();
  /** The node the next probe reads. */
  #probeNode: number;

  /**
   * @param redlock the client whose nodes and options the permits use (`edge-redlock` or `edge-redlock/core`).
   * @param name a non-empty string of at most 1024 characters; any string (its keys are in the reserved namespace).
   * @param permits how many holders at once: an integer from 1 to {@link MAX_PERMITS}.
   * @throws {InvalidArgumentError} for a missing client, a bad name or a bad number of permits.
   */
  constructor(redlock: Redlock, name: string, permits: number) {
    this.#redlock = validateClient(redlock, "new Semaphore()");
    this.name = validateName(name, "a Semaphore");
    if (!Number.isInteger(permits) || permits < 1 || permits > MAX_PERMITS) {
      throw new InvalidArgumentError(`permits must be an integer from 1 to ${MAX_PERMITS}, got ${String(permits)}`);
    }
    this.permits = permits;
    this.#engine = this.#redlock.engine;
    this.#probeNode = Math.floor(Math.random() * this.#engine.nodes.length);
    this.#operations = lockOperations(this.#engine, (lock) => {
      for (const [key, held] of this.#own) if (held === lock) this.#own.delete(key);
    });
  }

  /**
   * Take a permit, waiting (see the module's documentation) while every permit is held.
   * @param ttlMs lease in milliseconds, as for a lock.
   * @param options as for `Redlock.acquire()`.
   * @throws {LockHeldError} every permit stayed held: the waiter did not move up the line for its
   * patience, or spent `maxAttempts` fan-outs (with the line's gate down: `maxAttempts` rounds).
   * @throws {QuorumUnavailableError | ValidityExhaustedError | AcquireTimeoutError | AbortedError | RequestBudgetError | ConfigurationError | InvalidArgumentError} as `Redlock.acquire()`.
   */
  async acquire(ttlMs: number, options?: AcquireOptions): Promise<Lock> {
    const call = prepareCall(this.#engine, ttlMs, options, "semaphore.acquire()");
    refuseNested(this.#engine, this.#held(call), "semaphore.acquire()");
    return this.#redlock.cluster.acquire(call.o, call.signal, call.meter, () => this.#take(call, call.o.maxAttempts));
  }

  /**
   * Take a permit without pausing: a try, and when its slot is held, one probe and a try of a slot
   * found free. Resolves `null` when every permit is held; still throws for node failures.
   */
  async tryAcquire(ttlMs: number, options?: AcquireOptions): Promise<Lock | null> {
    const call = prepareCall(this.#engine, ttlMs, options, "semaphore.tryAcquire()");
    try {
      return await this.#redlock.cluster.acquire(call.o, call.signal, call.meter, () => this.#take(call, 1));
    } catch (error) {
      if (error instanceof LockHeldError) return null;
      throw error;
    }
  }

  /**
   * Run `routine` under a permit, as `Redlock.using()` runs one under a lock: automatic extension,
   * a signal that aborts before the permit can be lost, release in `finally`.
   */
  async using<T>(
    ttlMs: number,
    routine: (signal: AbortSignal, permit: Lock) => Promise<T>,
    options?: UsingOptions,
  ): Promise<T> {
    const call = prepareCall(this.#engine, ttlMs, options, "semaphore.using()", true);
    refuseNested(this.#engine, this.#held(call), "semaphore.using()");
    const permit = await this.#redlock.cluster.acquire(call.o, call.signal, call.meter, () =>
      this.#take(call, call.o.maxAttempts),
    );
    return runUsing(this.#redlock, call, this.#held(call), permit, routine);
  }

  /** This semaphore as a `using()` routine holds it (see `refuseNested`). */
  #held(call: Call): string {
    return primitiveKey(call.o.keyPrefix, "semaphore", this.name, "");
  }

  /**
   * A try of a slot picked at random; when it is held, waiting in line (see `semaphore-line.ts`);
   * when the line's gate does not answer, or for `tryAcquire()` (`maxRounds` 1), probes and tries
   * with pauses until a slot is granted or `maxRounds` rounds are spent.
   */
  async #take(call: Call, maxRounds: number): Promise<Lock> {
    try {
      return await this.#takeSlot(call, maxRounds);
    } finally {
      endCall(call.meter);
    }
  }

  async #takeSlot(call: Call, maxRounds: number): Promise<Lock> {
    const { o, signal, meter } = call;
    const keys = Array.from({ length: this.permits }, (_, i) =>
      primitiveKey(o.keyPrefix, "semaphore", this.name, `${i}`),
    );
    const nodeCount = this.#engine.nodes.length;
    const base: AcquireRequest = { resources: [this.name], keys, ttlMs: call.ttlMs, options: o, meter };
    const reports: AttemptReport[] = [];
    const deadline = o.acquireTimeoutMs === undefined ? Number.POSITIVE_INFINITY : o.clock.now() + o.acquireTimeoutMs;
    const trySlot = async (slot: number) => {
      const request = { ...base, keys: [keys[slot] as string] };
      const result = await attemptAcquire(this.#engine, request, reports.length + 1, signal, this.#operations);
      reports.push(result.report);
      if (result.lock) this.#own.set(keys[slot] as string, result.lock);
      return result;
    };
    let lined = maxRounds <= 1;
    // While this isolate sees waiters in line, a caller joins the line at once (see `isHot`).
    const hot = !lined && isHot(this.#engine, lineKeys(o.keyPrefix, this.name)[0], o.clock.now());
    let slot = hot ? undefined : this.#pick(keys);
    let probed = false;
    for (let rounds = 0; ; ) {
      if (signal?.aborted) throw abortedError(base.resources, reports, signal.reason);
      if (slot !== undefined) {
        checkBudget(base, reports, meter.sent, nodeCount, nodeCount);
        const result = await trySlot(slot);
        if (result.lock) return result.lock;
        stopAfter(base, result.report, reports, signal, false);
        // Held elsewhere: find another. An outage: the same slot after a pause.
        if (refusalReason(outcomesOf(result.report), o.quorum) === "held") slot = undefined;
      }
      if (slot === undefined && !lined) {
        lined = true;
        const granted = await waitInLine({
          engine: this.#engine,
          o,
          signal,
          meter,
          request: base,
          reports,
          deadline,
          own: (i) => this.#holds(keys[i] as string),
          trySlot,
          probe: (gate) => {
            checkBudget(base, reports, meter.sent, 1, nodeCount);
            return this.#probe(o, keys, signal, meter, gate);
          },
          failure: () => this.#failure(reports, o),
        });
        if (granted !== "gate-down") return granted;
      }
      if (slot === undefined && !probed) {
        probed = true;
        checkBudget(base, reports, meter.sent, 1, nodeCount);
        const held = await this.#probe(o, keys, signal, meter);
        slot = held === undefined ? undefined : this.#pick(keys, held);
        if (slot !== undefined) continue;
      }
      if (++rounds >= maxRounds) throw this.#failure(reports, o);
      const last = reports.at(-1);
      const delay =
        last === undefined
          ? fullJitterDelay(rounds, o.retryBaseDelayMs, o.retryMaxDelayMs, Math.random())
          : retryDelay(o, rounds, last, reports, base.resources);
      if (o.clock.now() + delay >= deadline) throw acquireTimeout(base, reports);
      try {
        await sleep(delay, signal);
      } catch (reason) {
        throw abortedError(base.resources, reports, reason);
      }
      probed = false;
    }
  }

  /** Whether this instance holds a live permit on the slot `key`. */
  #holds(key: string): boolean {
    const own = this.#own.get(key);
    if (own !== undefined && !own.released && own.remainingMs() > 0) return true;
    if (own !== undefined) this.#own.delete(key);
    return false;
  }

  /**
   * A slot picked at random among those not held by this instance's live permits and, given
   * `held` (a probe's answer), free there too; `undefined` when there is none.
   */
  #pick(keys: readonly string[], held?: readonly boolean[]): number | undefined {
    const candidates: number[] = [];
    keys.forEach((key, i) => {
      if (held?.[i] !== true && !this.#holds(key)) candidates.push(i);
    });
    return candidates.length === 0 ? undefined : candidates[Math.floor(Math.random() * candidates.length)];
  }

  /** Which slots the next node in turn (never `skip`) holds (one request); `undefined` when it did not answer. */
  async #probe(
    o: ResolvedOptions,
    keys: readonly string[],
    signal: AbortSignal | undefined,
    meter: Call["meter"],
    skip?: number,
  ): Promise<boolean[] | undefined> {
    const count = this.#engine.nodes.length;
    if (this.#probeNode === skip && count > 1) this.#probeNode = (this.#probeNode + 1) % count;
    const index = this.#probeNode;
    this.#probeNode = (index + 1) % count;
    let held: boolean[] | undefined;
    const fan = this.#engine.fan(
      o,
      "acquire",
      [this.name],
      {
        yes: "verified",
        signal,
        meter,
        task: async (i, context) => {
          held = await probeOnNode(this.#engine.node(i), keys, context);
          return "verified";
        },
      },
      o.requestTimeoutMs,
      [index],
    );
    await fan.decided;
    return held;
  }

  /** Every permit held (the last try was refused as held, or none was made), or the last try's failure. */
  #failure(reports: AttemptReport[], o: ResolvedOptions): RedlockError {
    const last = reports.at(-1);
    if (last !== undefined && (last.votes >= o.quorum || refusalReason(outcomesOf(last), o.quorum) !== "held")) {
      return failureError([this.name], reports, o.quorum);
    }
    const tries = `${reports.length} tr${reports.length === 1 ? "y" : "ies"}`;
    return new LockHeldError(`all ${this.permits} permits of ${this.name} are held (${tries})`, reports);
  }
}

function outcomesOf(report: AttemptReport) {
  return report.nodes.map((n) => n.outcome);
}
