/**
 * How `acquire()` waits for a lock that is held elsewhere.
 *
 * The first attempt is a plain fan-out to every node: uncontended, a lock costs one round trip.
 * When the lock turns out to be held, the client does not fan out again and again. It waits in
 * line at the resource's gate node (see `scripts/gate.ts`), polling it with one request:
 * - the gate keeps a queue of waiters, so they take turns (no starvation, and a client that just
 *   released goes to the back of the line when it comes again);
 * - only the first in line tries to take the lock, so waiters that start together never split the
 *   votes among themselves;
 * - the gate records how long holds last, so the first in line aims a fan-out to every node to
 *   land just after the predicted release (its take of the gate node rides in the same round
 *   trip); the others sleep until the waiter ahead of them should have taken the lock;
 * - a poll that finds the lock free takes the gate node at once, and the other nodes follow;
 * - when the holder is in the same isolate, its release hands the lock over to the first in line
 *   (see `handoff.ts`): no take of its own, a round trip sooner.
 *
 * Safety never depends on the gate: every grant is a quorum of `SET NX` (or of keys a release set
 * for us in the same step as it deleted its own) with enough validity, counted from before the
 * first request that could have set a key. When the gate is down or slow,
 * waiting falls back to fan-outs with full-jitter backoff, and a gate that forgot the lock (a
 * restart) gets a placeholder key, so that the waiters keep polling one node.
 * @module
 */
import { fullJitterDelay } from "./backoff.js";
import type { Engine } from "./engine.js";
import { AbortedError, AcquireTimeoutError, ConfigurationError, InvalidArgumentError } from "./errors.js";
import type { TaskContext } from "./fanout.js";
import { type GateAnswer, type GateMode, gateIndex, hotKeyOf, pollGate } from "./gate.js";
import type { HandoffOffer } from "./handoff.js";
import type { Turn } from "./hot-resources.js";
import { Lock, type LockOperations } from "./lock.js";
import {
  type AcquireRequest,
  type AttemptResult,
  abortedError,
  attemptAcquire,
  failureError,
  type GateRole,
} from "./operations/acquire.js";
import { attemptFenced } from "./operations/acquire-fenced.js";
import { summary } from "./operations/summary.js";
import { MAX_DELAY_MS, type ResolvedOptions } from "./options.js";
import { driftMs, refusalReason } from "./quorum.js";
import type { AttemptReport, NodeOutcomeKind } from "./report.js";
import { sleep, within } from "./signals.js";
import { randomToken } from "./token.js";

/** Shortest margin between a predicted release and the take aimed at it, in ms (timers fire late, by about this much). */
const MIN_MARGIN_MS = 2;
/** Shortest and longest pause between two polls of the gate, in ms. */
const MIN_POLL_MS = 5;
const MAX_POLL_MS = 100;
/**
 * Longest pause between polls when the gate cannot predict the release (no hold recorded yet, or
 * the holder is past the prediction), in ms.
 */
const MAX_UNPREDICTED_POLL_MS = 100;
/** Shortest first placeholder on a gate out of step before any hold is recorded, in ms. */
const MIN_UNKNOWN_PLACEHOLDER_MS = 200;
/** Waiters further back than this many turns wake early, as estimates of many turns add up errors. */
const FAR_BACK = 6;
/** Longest sleep of a waiter far back in line before it polls again, in ms. */
const MAX_SLEEP_MS = 2000;

/**
 * A cap on a sleep, spread at random over its upper 40 %. Every waiter far back in a long line
 * reaches the cap: with one cap they all woke together (a trace of the bench's 64 clients at
 * +20 ms: 35–60 polls of the gate within 100–200 ms, every second), and the burst slowed the
 * holder's own requests and the handoff.
 */
function spreadCap(capMs: number): number {
  return capMs * (0.6 + 0.4 * Math.random());
}

/**
 * `acquire()`: attempts until one succeeds or attempts, time or the caller's signal run out.
 * @param maxAttempts fan-outs allowed (polls of the gate are not attempts).
 * @throws {LockHeldError | QuorumUnavailableError | ValidityExhaustedError | AcquireTimeoutError | AbortedError | ConfigurationError}
 */
export async function acquireWithWaiting(
  engine: Engine,
  request: AcquireRequest,
  maxAttempts: number,
  signal: AbortSignal | undefined,
  operations: LockOperations,
): Promise<Lock> {
  return new Acquisition(engine, request, maxAttempts, signal, operations).run();
}

/** An attempt that a release started for a waiter by handing it the lock over, with its token (see `handoff.ts`). */
type HandedOver = { readonly attempt: Promise<AttemptResult>; readonly token: string };

/** Waiting in line ended before any fan-out (see `Acquisition.#lastFanOutIfNone`); never leaves the class. */
class PatienceRanOut extends Error {}

/** Numbers this process's acquisitions: their entries among a client's busy keys. */
let acquisitions = 0;

class Acquisition {
  readonly #engine: Engine;
  readonly #request: AcquireRequest;
  readonly #o: ResolvedOptions;
  readonly #maxAttempts: number;
  readonly #signal: AbortSignal | undefined;
  readonly #operations: LockOperations;
  readonly #reports: AttemptReport[] = [];
  /** The gate node's index: hashed only when this call first needs the gate. */
  #gateIndex: number | undefined;
  readonly #hotKey: string;
  readonly #deadline: number;
  /** This call's identity in the gate's queue, made when it first waits. */
  #waiterId: string | undefined;
  #ticket = 0;
  #attempts = 0;
  #polls = 0;
  /** Average poll round trip, in ms. */
  #rtt = 0;
  #gateDown = false;
  /**
   * How many takes of the gate in a row, by anyone, found it free with no release through it since
   * the take before: placeholders that ran out (see `#placeholderMs`). From our last take.
   */
  #unreleasedTakes = 0;
  /** How many times a take of the gate found the others holding another token (see `#placeholderMs`). */
  #outOfStep = 0;
  /** Waiting without progress (no release seen at the gate) ends after this clock reading. */
  #patienceUntil: number;
  /** The gate's count of releases at our last poll (-1 before the first). */
  #lastTurns = -1;
  /** The patience ran out during a sleep and the waiter has polled once since (see `#pause`). */
  #lookedPastPatience = false;
  /** When a poll first found us first in line (reset when we are not). */
  #headSince: number | undefined;
  /** Whether the gate's line holds an entry of ours (to leave when we are done another way). */
  #inLine = false;
  /** Whether the gate's last answer had us first in line. */
  #firstInLine = false;
  /** When our place in line runs out unless we poll again (the lease of our last poll, from its send). */
  #leaseUntil = 0;
  /** When the placeholder we left on the gate runs out (see `#growPlaceholder`). */
  #placeholderUntil = 0;
  /** The token of a placeholder we may have left on the gate (see `#growPlaceholder`). */
  #placeholderToken: string | undefined;
  /** The gate's last word on the average interval between takes. */
  #holdMs = 0;
  /** Another resource set that shares keys with ours holds them (see `GateAnswer.contested`). */
  #foreign = false;
  /** Since when polls have found the current holder past the gate's prediction (see `#noteOverdue`). */
  #overdue: { since: number; turns: number } | undefined;

  constructor(
    engine: Engine,
    request: AcquireRequest,
    maxAttempts: number,
    signal: AbortSignal | undefined,
    operations: LockOperations,
  ) {
    this.#engine = engine;
    this.#request = request;
    this.#o = request.options;
    this.#maxAttempts = maxAttempts;
    this.#signal = signal;
    this.#operations = operations;
    this.#hotKey = hotKeyOf(request.keys);
    const now = this.#o.clock.now();
    this.#deadline = this.#o.acquireTimeoutMs === undefined ? Number.POSITIVE_INFINITY : now + this.#o.acquireTimeoutMs;
    this.#patienceUntil = Number.POSITIVE_INFINITY;
  }

  async run(): Promise<Lock> {
    const hot = this.#engine.hot;
    const key = this.#hotKey;
    const now = this.#o.clock.now();
    // Queue up at once for a resource this isolate just waited for, or is acquiring or holding for
    // another caller right now; a single attempt never waits, and a custom retryDelay asks for
    // fan-outs at its own pace, in the isolate as anywhere.
    const queueAtOnce = this.#o.retryDelay === undefined && (hot.isHot(key, now) || hot.isBusy(key, now));
    // Our own entry lasts at most the attempts' deadline, in case we never get to leave it.
    const self = `acquiring:${++acquisitions}`;
    hot.occupy(key, self, Math.min(this.#deadline, now + this.#o.requestTimeoutMs * this.#maxAttempts), "acquiring");
    try {
      const lock = await this.#acquire(queueAtOnce);
      // Held until released, or until its deadline at most (an extension is not followed).
      hot.occupy(key, lock.token, this.#o.clock.now() + lock.remainingMs(), "holding");
      return lock;
    } finally {
      hot.leave(key, self);
      if (this.#ticket > 0) hot.stopWaiting(key, this.#ticket);
    }
  }

  async #acquire(queueAtOnce: boolean): Promise<Lock> {
    try {
      if (this.#maxAttempts > 1 && !this.#o.fencing && queueAtOnce) {
        // Our last release may have kept us a place at the back of the line: sleep as a poll
        // from there would have told us to, and skip the poll.
        const place = await this.#engine.hot
          .takePlace(this.#hotKey, this.#o.clock, this.#signal)
          .catch((reason: unknown) => this.#abandon(reason));
        if (place === undefined) return await this.#lastFanOutIfNone(() => this.#waitInLine());
        this.#waiterId = place.waiter;
        this.#setTicket(place.ticket);
        this.#inLine = true;
        this.#firstInLine = place.answer.rank === 0;
        this.#lastTurns = place.answer.turns;
        this.#rtt = place.rttMs;
        this.#leaseUntil = place.at - place.rttMs + place.leaseMs;
        const elapsed = this.#o.clock.now() - place.at;
        return await this.#lastFanOutIfNone(() =>
          this.#waitInLine(Math.max(0, this.#sleepFor(place.answer) - elapsed)),
        );
      }
      const first = await this.#fanOut();
      if (first.lock) return first.lock;
      return await this.#afterFailedAttempt(first);
    } catch (error) {
      // Giving up, whatever the reason: out of line, and no placeholder of ours left behind.
      this.#leave();
      throw error;
    }
  }

  /**
   * `wait()`, for a caller that queued up at once: if its patience runs out before it made a
   * single fan-out, it makes one, so that it gives up on what the nodes say (and its error lists
   * the attempt) rather than on the line alone.
   */
  async #lastFanOutIfNone(wait: () => Promise<Lock>): Promise<Lock> {
    try {
      return await wait();
    } catch (error) {
      if (!(error instanceof PatienceRanOut)) throw error;
      const last = await this.#fanOut();
      if (last.lock) return last.lock;
      this.#checkAfterAttempt(last.report);
      throw failureError(this.#request.resources, this.#reports, this.#o.quorum);
    }
  }

  /** After a failed fan-out: wait in line when the lock is held elsewhere, else back off. */
  async #afterFailedAttempt(result: AttemptResult): Promise<Lock> {
    this.#checkAfterAttempt(result.report);
    if (this.#shouldWaitInLine(result.report)) return this.#waitInLine();
    return this.#backOff(result.report);
  }

  /**
   * Another holder answered, the gate is up, and no custom retry schedule was asked for. Fenced
   * locks wait with backoff: their acquisition is two phases, which the gate's take does not cover.
   */
  #shouldWaitInLine(report: AttemptReport): boolean {
    return (
      !this.#gateDown &&
      !this.#foreign &&
      !this.#o.fencing &&
      this.#o.retryDelay === undefined &&
      this.#isContention(report)
    );
  }

  /** Fan-outs with the retry policy's delays in between: node failures, or no gate. */
  async #backOff(last: AttemptReport): Promise<Lock> {
    let report = last;
    for (;;) {
      const delay = this.#retryDelay(report);
      // As retries always did: give up at once when the delay would cross the acquire deadline.
      if (this.#o.clock.now() + delay >= this.#deadline) this.#timeOut();
      await this.#sleep(delay);
      // The gate answered the last fan-out after its vote was decided (see `#fanOut`).
      if (this.#shouldWaitInLine(report)) return this.#waitInLine();
      const result = await this.#fanOut();
      if (result.lock) return result.lock;
      this.#checkAfterAttempt(result.report);
      // Nodes that failed are back and answer that the lock is held: wait in line after all.
      if (this.#shouldWaitInLine(result.report)) return this.#waitInLine();
      report = result.report;
    }
  }

  /** Poll the gate until it is our turn, then take the lock. */
  get #gate(): number {
    this.#gateIndex ??= gateIndex(this.#request.keys, this.#engine.nodes.length);
    return this.#gateIndex;
  }

  get #waiter(): string {
    this.#waiterId ??= randomToken();
    return this.#waiterId;
  }

  async #waitInLine(firstPollInMs = 0): Promise<Lock> {
    if (this.#patienceUntil === Number.POSITIVE_INFINITY) this.#patienceUntil = this.#o.clock.now() + this.#patience();
    this.#engine.hot.mark(this.#hotKey, this.#o.clock.now(), this.#hotWindow(0));
    let nextPollMs = firstPollInMs;
    for (;;) {
      // While our own placeholder holds the gate, a poll would only find it there. While a holder
      // in this isolate has the lock, the first in line waits for its release to hand it over,
      // with no poll (by the holder's deadline at most: a holder that never releases lets its
      // lock run out).
      const now = this.#o.clock.now();
      const placeholderMs = this.#placeholderUntil - now;
      const first = this.#firstInLine && placeholderMs <= 0;
      const heldHereMs = first && this.#offersHandoff ? this.#offerWindowEnd(now) - now : 0;
      const handedOver = await this.#pauseOrTakeOver(Math.max(nextPollMs, placeholderMs, heldHereMs), first);
      if (handedOver) {
        const lock = await this.#takeTurn(handedOver);
        if (lock) return lock;
        nextPollMs = this.#pollInterval(this.#holdMs);
        continue;
      }
      // Callers of this isolate that join the line together take turns to send their first polls.
      const joined = this.#inLine
        ? undefined
        : await this.#engine.hot
            .joinSlot(this.#hotKey, this.#o.clock, this.#o.requestTimeoutMs, this.#signal)
            .catch((reason: unknown) => this.#abandon(reason));
      if (joined === "gate-down") {
        this.#gateDown = true;
        return this.#fanOutThenBackOff();
      }
      const sentAt = this.#o.clock.now();
      const token = randomToken();
      let answer: GateAnswer;
      try {
        // While a sibling's plain fan-out may still be on its way to the gate, only queue up:
        // taking the gate before its `SET NX` lands there would split the nodes between us (it
        // wins the others, our placeholder holds the gate, and the line waits for that).
        const racing = this.#engine.hot.isRacing(this.#hotKey, sentAt);
        answer = await this.#poll(racing ? "wait" : "take", token, this.#leaseFor(nextPollMs));
      } catch (error) {
        const gateDown = !(error instanceof ConfigurationError || error instanceof AbortedError);
        joined?.(!gateDown);
        if (error instanceof ConfigurationError) throw this.#configurationError(error);
        if (error instanceof AbortedError) throw error;
        // The gate is down or slow: never wait on it longer than one request deadline.
        this.#gateDown = true;
        return this.#fanOutThenBackOff();
      }
      joined?.(true);
      const answeredAt = this.#o.clock.now();
      this.#engine.hot.mark(this.#hotKey, answeredAt, this.#hotWindow(answer.holdMs));
      this.#holdMs = answer.holdMs;
      if (answer.taken) {
        // The poll set the keys on the gate: the other nodes follow, and validity counts from
        // the poll's send.
        const result = await this.#fanOut({
          index: this.#gate,
          token,
          startedAt: sentAt,
          takenAt: answeredAt,
          placeholderMs: () => this.#placeholderMs,
          task: async () => "acquired",
          // Ask the others again only when the previous holder just released through the gate:
          // its release is on its way to them. A gate free with no release is out of step.
          gateTaken: () => answer.releasedAgoMs >= 0,
          ...this.#retryHeld(answer.holdMs),
        });
        if (result.lock) return result.lock;
        this.#checkAfterAttempt(result.report);
        this.#growPlaceholder(result.report, token);
        nextPollMs = this.#pollInterval(answer.holdMs);
        continue;
      }
      this.#noteProgress(answer);
      this.#noteOverdue(answer);
      if (answer.contested) return this.#leaveForBackoff();
      const interval = this.#pollInterval(answer.holdMs);
      const predicted = answer.holdMs > 0 && answer.pttlMs !== -2;
      if (answer.rank === 0 && predicted && answer.freeInMs > 0 && answer.freeInMs <= MAX_SLEEP_MS) {
        // First in line, and the gate expects the lock to free up: be there when it does, with a
        // fan-out to every node that takes the gate node in the same round trip. A request sent
        // `freeIn` after the poll was sent reaches the gate `freeIn` after the poll did, whatever
        // the split of the round trip between the two ways; a margin of twice the holds' average
        // deviation makes landing before the release (a wasted fan-out) the exception.
        // A holder in this isolate hands the lock over in its release (see above): a take aimed
        // at that release would only race it.
        if (this.#offersHandoff && this.#engine.hot.heldHereFor(this.#hotKey, sentAt) > 0) {
          nextPollMs = 0;
          continue;
        }
        const aim = sentAt + answer.freeInMs + this.#margin(answer);
        const handedOver = await this.#pauseOrTakeOver(Math.max(0, aim - this.#o.clock.now()), true);
        const lock = await this.#takeTurn(handedOver);
        if (lock) return lock;
        nextPollMs = interval;
        continue;
      }
      nextPollMs = this.#sleepFor(answer);
    }
  }

  /**
   * Sleep `ms` (see `#pause`); when `firstInLine`, offer meanwhile to take the lock over from a
   * release of it in this isolate (see `handoff.ts`): the release then sets our keys where it
   * deletes its own, a round trip sooner than a take sent after it (or aimed at the gate's
   * prediction, which lands a few ms late at best), and never before it. Returns the attempt such
   * a release started for us, if one did. A lock of several resources is never handed over: a
   * resource set that shares a key with ours waits in another line, and a lock handed from release
   * to release would keep that key from it for good (see `#leaveForBackoff`).
   */
  async #pauseOrTakeOver(ms: number, firstInLine: boolean): Promise<HandedOver | "free" | undefined> {
    if (!this.#offersHandoff || ms <= 0) {
      await this.#pause(ms);
      return undefined;
    }
    const clock = this.#o.clock;
    const until = Math.min(clock.now() + ms, this.#pauseLimit());
    if (firstInLine) return this.#pauseOffering(until - clock.now());
    const turn = await this.#pauseUntilTurn(until - clock.now());
    if (turn !== "first") return turn;
    // First in line now, behind the holder the release handed the lock to (its grant may not be
    // known here yet): offer for a poll interval at least, and on while it holds the lock.
    return this.#pauseOffering(Math.max(until - clock.now(), this.#pollInterval(this.#holdMs)));
  }

  /**
   * Sleep `ms` (see `#pause`), or until a release of our resource in this isolate learns from the
   * gate that we are first in line (see `HotResources.listenForTurn`): a waiter further back then
   * need not poll to learn that its turn is next, and the release before its turn finds its offer
   * standing. `free`: the lock is free, and ours to take now.
   */
  async #pauseUntilTurn(ms: number): Promise<Turn | undefined> {
    if (this.#ticket <= 0 || ms <= 0) {
      await this.#pause(ms);
      return undefined;
    }
    const hot = this.#engine.hot;
    const listening = hot.listenForTurn(this.#hotKey, this.#ticket);
    let turn: Turn | undefined;
    try {
      turn = await within(listening.turn, ms, this.#signal);
    } catch (reason) {
      this.#abandon(reason);
    } finally {
      listening.stop();
    }
    if (turn === undefined) await this.#pause(0);
    else this.#firstInLine = true;
    return turn;
  }

  /** Sleep `ms` with an offer standing (see `#pauseOrTakeOver`). */
  async #pauseOffering(ms: number): Promise<HandedOver | undefined> {
    if (ms <= 0) {
      await this.#pause(0);
      return undefined;
    }
    let handedOver: HandedOver | undefined;
    let accepted: () => void = () => {};
    const acceptance = new Promise<void>((resolve) => (accepted = resolve));
    const token = randomToken();
    const ttlMs = this.#request.ttlMs;
    const offer: HandoffOffer = {
      keys: this.#request.keys,
      token,
      ttlMs,
      waiter: this.#waiter,
      accept: (outcomes, sentAt) => {
        const role: GateRole = {
          index: this.#gate,
          token,
          startedAt: sentAt,
          task: () => outcomes(this.#gate),
          others: outcomes,
          placeholderMs: () => this.#placeholderMs,
          gateTaken: () => false,
          retryHeldMs: 0,
          retryHeldEveryMs: 0,
        };
        // Started at once, with our signal: if we give up before reading it, it aborts and undoes
        // whatever the release set for us.
        const attempt = attemptAcquire(
          this.#engine,
          this.#request,
          this.#attempts + 1,
          this.#signal,
          this.#operations,
          role,
          this.#polls,
        );
        attempt.catch(() => undefined);
        handedOver = { attempt, token };
        accepted();
      },
    };
    const hot = this.#engine.hot;
    hot.offerHandoff(this.#hotKey, offer);
    try {
      // While a holder in this isolate has the lock, its release will take the offer up: keep it
      // standing (by the holder's deadline and our own limit at most) rather than poll.
      let until = this.#o.clock.now() + ms;
      for (;;) {
        await within(acceptance, until - this.#o.clock.now(), this.#signal);
        const now = this.#o.clock.now();
        const held = Math.min(this.#offerWindowEnd(now), this.#pauseLimit());
        if (handedOver !== undefined || held <= now) break;
        until = held;
      }
    } catch (reason) {
      this.#abandon(reason);
    } finally {
      hot.withdrawHandoff(this.#hotKey, offer);
    }
    // A release may have taken the offer up as our timer fired.
    if (handedOver === undefined) await this.#pause(0);
    return handedOver;
  }

  /**
   * Our turn, as a pause ended: the attempt a release made for us by handing the lock over, or,
   * when the lock is free (or its release is due), a take aimed at it.
   */
  #takeTurn(turn: HandedOver | "free" | undefined): Promise<Lock | undefined> {
    return turn === undefined || turn === "free" ? this.#takeAtRelease() : this.#takeOver(turn);
  }

  /**
   * Until when the first in line may wait for a holder of its isolate to hand the lock over
   * without polling: by the holder's deadline, and a round trip before our place in line runs out
   * (a waiter whose place ran out is no longer first there, and the gate would refuse the hand-over
   * that the other nodes carry out). `now` when no holder of the isolate has the lock.
   */
  #offerWindowEnd(now: number): number {
    const held = this.#engine.hot.heldHereFor(this.#hotKey, now);
    if (held <= 0) return now;
    return Math.max(now, Math.min(now + held, this.#leaseUntil - this.#rtt - MIN_POLL_MS));
  }

  /** Whether a release may hand this lock over: a lock of one resource (see `#pauseOrTakeOver`). */
  get #offersHandoff(): boolean {
    return this.#request.keys.length === 1;
  }

  /** The attempt a release made for us by handing the lock over (see `#pauseOrTakeOver`). */
  async #takeOver(handedOver: HandedOver): Promise<Lock | undefined> {
    const result = await this.#fanOut(undefined, handedOver.attempt);
    if (result.lock) return result.lock;
    this.#checkAfterAttempt(result.report);
    if (result.report.nodes[this.#gate]?.outcome === "acquired") {
      // The gate handed its keys over to us, and took us out of its line, as a take does.
      this.#inLine = false;
      this.#unreleasedTakes = 0;
      this.#growPlaceholder(result.report, handedOver.token);
    }
    return undefined;
  }

  /**
   * A take aimed at a release. If it came too early (the holder is past its usual hold), its
   * release is most likely on the way by the time our answer is back: one more take at once costs
   * the same requests as a poll and the fan-out after it, a round trip sooner; after that, polls.
   */
  async #takeAtRelease(): Promise<Lock | undefined> {
    const early = await this.#speculativeTake();
    if (early === undefined || early instanceof Lock) return early;
    const again = await this.#speculativeTake();
    return again instanceof Lock ? again : undefined;
  }

  /**
   * Some of our keys are held by another resource set: its line waits at another gate, and its
   * releases never pass through ours, so a line here would wait for turns it never sees while
   * that line's takes, aimed at its own releases, keep the shared keys (the bench's overlapping
   * sets part: 0–3 % of the grants for one set in some runs). Leave the line, and wait with
   * fan-outs and backoff for the rest of this acquisition, as the other set's waiters do when
   * they meet our holds.
   */
  async #leaveForBackoff(): Promise<Lock> {
    this.#foreign = true;
    this.#leave();
    const last = this.#reports.at(-1);
    return last === undefined ? this.#fanOutThenBackOff() : this.#backOff(last);
  }

  /** Waiting in line is over: a fan-out now, then fan-outs with the retry policy's delays. */
  async #fanOutThenBackOff(): Promise<Lock> {
    const result = await this.#fanOut();
    if (result.lock) return result.lock;
    this.#checkAfterAttempt(result.report);
    return this.#backOff(result.report);
  }

  /**
   * A fan-out in which the gate node gets an aim-mode poll instead of `SET NX`. Returns the lock,
   * or the gate's answer when it came too early (first in line, the lock still held past its
   * predicted release), or nothing.
   */
  async #speculativeTake(): Promise<Lock | GateAnswer | undefined> {
    const token = randomToken();
    let answer: GateAnswer | undefined;
    // The others' answers may come back before the gate's: a node that says "held" waits for it
    // to learn whether the release is on its way (see `GateRole.gateTaken`).
    let gateAnswered: (taken: boolean) => void = () => {};
    const gateTaken = new Promise<boolean>((resolve) => {
      gateAnswered = resolve;
    });
    const result = await this.#fanOut({
      index: this.#gate,
      token,
      placeholderMs: () => this.#placeholderMs,
      gateTaken: () => gateTaken,
      ...this.#retryHeld(this.#holdMs),
      task: async (context: TaskContext): Promise<NodeOutcomeKind> => {
        try {
          answer = await this.#pollOn(context, "aim", token, this.#leaseFor(this.#pollInterval(0)));
          return answer.taken ? "acquired" : "held";
        } finally {
          gateAnswered(answer?.taken === true && answer.releasedAgoMs >= 0);
        }
      },
    });
    if (result.lock) return result.lock;
    this.#checkAfterAttempt(result.report);
    if (answer === undefined) return undefined;
    this.#noteProgress(answer);
    if (answer.taken) this.#growPlaceholder(result.report, token);
    else if (answer.rank === 0 && answer.pttlMs !== -2 && answer.freeInMs <= this.#rtt) return answer;
    return undefined;
  }

  /**
   * We took the gate but the others hold another token: the gate lost track (a restart, or a
   * fresh client's keys), or, most often under contention, a waiter won the other nodes while the
   * gate still saw the previous holder (its release reached the nodes in a different order). Each
   * time, our placeholder there lasts twice as long, up to the TTL, so that a gate out of step
   * costs fan-outs at a shrinking rate while the waiters poll one node. We poll again when it
   * runs out: before, a poll would only find our own placeholder (first in line, we polled it
   * every few milliseconds).
   */
  #growPlaceholder(report: AttemptReport, token: string): void {
    const outcomes = report.nodes.map((n) => n.outcome);
    if (refusalReason(outcomes, this.#o.quorum) === "held") {
      this.#placeholderUntil = this.#o.clock.now() + this.#placeholderMs;
      this.#outOfStep++;
      this.#placeholderToken = token;
    }
  }

  /**
   * How long a placeholder left on the gate lasts. The first lasts two of the holds the gate has
   * seen: a holder that won without the gate took the lock a moment ago and lets go within about
   * a hold, and the whole line waits for the placeholder. Before any hold is recorded (a line
   * that is forming, or a gate that lost its keys) it lasts four of our round trips, at least
   * 200 ms: a request deadline (1 s by default) stood the line still for most of a second after
   * the holder had let go, and waiters with 0.9 s of patience gave up (the bench at C = 8 with
   * jitter; test/unit/waiting.test.ts). A gate out of step shows itself again each time: then
   * twice as long each time, so a long hold costs a few fan-outs. The gate counts the times for the
   * whole line (takes that found it free with no release since the take before): counted by each
   * waiter alone, waiters taking turns at the gate each started again from the first, and behind a
   * 5 s hold some gave up after their 10 attempts (test/unit/waiting.test.ts).
   */
  get #placeholderMs(): number {
    const longest = Math.max(50, this.#o.requestTimeoutMs);
    const unknownHold = this.#rtt > 0 ? Math.max(MIN_UNKNOWN_PLACEHOLDER_MS, 4 * this.#rtt) : longest;
    const first = Math.min(this.#holdMs > 0 ? Math.max(50, 2 * this.#holdMs) : unknownHold, longest);
    return Math.min(first * 2 ** Math.max(this.#outOfStep, this.#unreleasedTakes), this.#request.ttlMs);
  }

  /**
   * One attempt (a fan-out to every node), counted and checked against the limits. `handedOver`:
   * the attempt a release already started for us (see `#pauseOrTakeOver`).
   */
  async #fanOut(gate?: GateRole, handedOver?: Promise<AttemptResult>): Promise<AttemptResult> {
    this.#checkAbort();
    this.#attempts++;
    const racing = gate === undefined && handedOver === undefined && !this.#o.fencing ? this.#race() : undefined;
    const result = handedOver
      ? await handedOver
      : this.#o.fencing
        ? await attemptFenced(this.#engine, this.#request, this.#attempts, this.#signal, this.#operations, this.#polls)
        : await attemptAcquire(
            this.#engine,
            this.#request,
            this.#attempts,
            this.#signal,
            this.#operations,
            gate,
            this.#polls,
          );
    this.#polls = 0;
    this.#reports.push(result.report);
    if (racing !== undefined) {
      const gateOutcome = result.report.nodes[this.#gate]?.outcome;
      if (gateOutcome === "pending" && result.fan) void result.fan.outcomeOf(this.#gate).then(racing, racing);
      else racing();
    }
    // A gate that timed out on a poll but answers in a fan-out is back: wait in line again. The
    // vote is often decided before the gate answers (a quorum of the others said "held"): then its
    // answer, if it comes within the request deadline, says so. Read only at settlement, a gate
    // slower than the other nodes never came back: under load, waiters kept fanning out until
    // their attempts ran out, splitting the votes (the chaos hot-key scenario beside busy loops).
    if (this.#gateDown) {
      const noteGate = (outcome: NodeOutcomeKind | undefined) => {
        if (outcome === "held" || outcome === "acquired") this.#gateDown = false;
      };
      const gateOutcome = result.report.nodes[this.#gate]?.outcome;
      noteGate(gateOutcome);
      if (gateOutcome === "pending" && !result.lock)
        void result.fan?.outcomeOf(this.#gate).then((o) => noteGate(o.outcome));
    }
    // Granted without the gate's take (a quorum of the others): step out of line at once, or
    // those behind us would wait for our lease to run out. A release that handed the gate's keys
    // over to us took us out of its line, as a take does: its answer tells.
    if (result.lock) {
      const fan = result.fan;
      if (handedOver && fan)
        void fan.outcomeOf(this.#gate).then((gate) => (gate.outcome === "acquired" ? undefined : this.#leave()));
      else this.#leave();
    }
    return result;
  }

  /**
   * Marks a plain fan-out as racing for the gate node until it answers (see `#waitInLine`), at
   * most a request deadline; returns what ends the mark.
   */
  #race(): () => void {
    const hot = this.#engine.hot;
    const id = `racing:${++acquisitions}`;
    hot.occupy(this.#hotKey, id, this.#o.clock.now() + this.#o.requestTimeoutMs, "racing");
    return () => hot.leave(this.#hotKey, id);
  }

  /** One poll of the gate, as a one-node fan-out: the same deadline, abort and hooks as every request. */
  async #poll(mode: GateMode, token: string, leaseMs: number): Promise<GateAnswer> {
    let answer: GateAnswer | undefined;
    const fan = this.#engine.fan(
      this.#o,
      "acquire",
      this.#request.resources,
      {
        yes: "acquired",
        signal: this.#signal,
        task: async (_, context) => {
          answer = await this.#pollOn(context, mode, token, leaseMs);
          return "acquired";
        },
      },
      this.#o.requestTimeoutMs,
      [this.#gate],
    );
    const [outcome] = await fan.outcomes;
    if (outcome?.outcome === "aborted")
      throw abortedError(this.#request.resources, this.#reports, this.#signal?.reason);
    if (answer === undefined) throw outcome?.error ?? new Error("the gate did not answer");
    return answer;
  }

  async #pollOn(context: TaskContext, mode: GateMode, token: string, leaseMs: number): Promise<GateAnswer> {
    this.#polls++;
    const started = this.#o.clock.now();
    const answer = await pollGate(
      this.#engine.node(this.#gate),
      this.#request.keys,
      { waiter: this.#waiter, mode, token, ttlMs: this.#request.ttlMs, leaseMs, ticket: this.#ticket },
      context,
    );
    const rtt = this.#o.clock.now() - started;
    this.#rtt = this.#rtt === 0 ? rtt : (3 * this.#rtt + rtt) / 4;
    this.#leaseUntil = started + leaseMs;
    if (answer.ticket > 0 && !answer.taken) this.#setTicket(answer.ticket);
    if (answer.taken) this.#unreleasedTakes = answer.unreleasedTakes;
    // A take removes us from the line; any other answer means we stand in it.
    this.#inLine = !answer.taken;
    this.#firstInLine = !answer.taken && answer.rank === 0;
    return answer;
  }

  /** Our ticket in the gate's line, under which a release of this isolate tells us our turn. */
  #setTicket(ticket: number): void {
    if (ticket === this.#ticket) return;
    if (this.#ticket > 0) this.#engine.hot.stopWaiting(this.#hotKey, this.#ticket);
    this.#ticket = ticket;
    this.#engine.hot.waitHere(this.#hotKey, ticket);
  }

  /** How long to sleep before the next poll, from our place in line. */
  #sleepFor(answer: GateAnswer): number {
    const interval = this.#pollInterval(answer.holdMs);
    const overdue = this.#overdue;
    if (answer.rank <= 0) {
      this.#headSince ??= this.#o.clock.now();
      if (overdue) return this.#patientPace(interval, overdue.since, answer.pttlMs);
      if (answer.freeInMs <= interval) return interval;
      // First in line, with no release to aim at within reach: the gate has no record of how long
      // holds last, or this holder's hold cannot be predicted (it won without the gate, with a
      // longer TTL than the line's), or it is predicted further off than a sleep. The holder may
      // let go any moment before its key expires (the bench's acquire behind a 300 ms hold: 14–15
      // subrequests in all). At a poll interval, the first in line behind a holder that died with
      // a 10 s key sent 182 requests (test/unit/waiting.test.ts).
      return this.#patientPace(interval, this.#headSince, answer.freeInMs);
    }
    this.#headSince = undefined;
    if (answer.holdMs === 0) {
      // No hold recorded yet: the first release through the gate will tell. A turn lasts at least
      // its holder's round trip (the holder learns it holds, then its release travels back), so
      // the waiters ahead of us take at least that long each; half of our own round trip leaves
      // room for holders nearer the nodes. A line of 64 that forms at once then polls about as
      // often as a line of a few: polling every 100 ms whatever the place, it sent 600 polls a
      // second and slowed the very handoffs it waited for. A guess that turns out long costs a
      // late turn (a lock left free for half a hold, 20 ms at least, goes to whoever polls first),
      // so it is kept under 500 ms.
      return Math.min(Math.max((answer.rank * this.#rtt) / 2, interval), spreadCap(MAX_SLEEP_MS / 4));
    }
    // Wake up once the waiter ahead of us should have taken the lock, so that one poll finds us
    // first in line with most of the hold still ahead to plan our take: a third of the way into
    // the window from that take to a round trip before its release. A turn is the line's measured
    // pace, but at most a hold plus the margin of a take and a quarter of a round trip (a line
    // that waits for late wakers would otherwise teach them to wake later still). Capped at a hold
    // plus the margin alone, the turn was a few ms short on real timers (they fire late, and takes
    // land after the margin), so a waiter several turns back woke a turn early and polled twice.
    // An early wake costs a poll, a late one a round trip of the handoff. Measured from the
    // answer's arrival: the next poll lands a round trip after it is sent.
    const margin = this.#margin(answer);
    const turnMs =
      answer.cycleMs > 0 ? Math.min(answer.cycleMs, answer.holdMs + margin + this.#rtt / 4) : answer.holdMs + margin;
    const settle = margin + Math.max(MIN_POLL_MS, (answer.holdMs - this.#rtt - margin) / 3);
    const ahead = answer.rank - 1;
    // Far back, the errors of many turns add up: look again a turn early and a little more. While
    // holds vary a lot (the line is warming up, or the holders' work varies), look again sooner
    // still, in proportion.
    const early = ahead > FAR_BACK ? turnMs * (1 + ahead / 32) : 0;
    const spread = answer.holdDeviationMs / answer.holdMs;
    const certainty = spread > 0.2 ? Math.max(0.5, 1.2 - spread) : 1;
    const wake = (answer.freeInMs + ahead * turnMs - early) * certainty + settle - this.#rtt;
    // Behind a holder past its prediction, the turns ahead start when it lets go: no sooner than
    // the first in line would see it.
    const paced = overdue ? Math.max(wake, this.#patientPace(interval, overdue.since, answer.pttlMs)) : wake;
    return Math.min(Math.max(paced, interval), spreadCap(MAX_SLEEP_MS));
  }

  /**
   * The pace of polls while the release cannot be predicted: in proportion to how long that has
   * lasted (arriving at most half that late), from a poll interval up to `MAX_UNPREDICTED_POLL_MS`,
   * and never past `expiresInMs` (the lock key's PTTL; -1 when it has none). A short wait is caught
   * within a poll interval, a long one costs 10 polls a second at most. (Thinning polls further as
   * a wait grows, to an eighth of it, cut a 10 s wait from about 70 requests to 47, but cost the
   * smaller of two overlapping resource sets half its share in test/unit/waiting.test.ts.)
   */
  #patientPace(interval: number, since: number, expiresInMs: number): number {
    const pace = Math.min(Math.max(interval, (this.#o.clock.now() - since) / 2), MAX_UNPREDICTED_POLL_MS);
    return expiresInMs > 0 ? Math.min(pace, expiresInMs) : pace;
  }

  /**
   * The holder has kept the lock past the gate's prediction (its work took longer this time, or it
   * died and its key runs out): from then on the line polls at a patient pace. At the pace of the
   * usual hold (an eighth of it) a waiter sent a request every few ms for as long as that lasted:
   * 3 waiters behind a 3 s hold in a line of 50 ms holds sent about 250 requests
   * (test/unit/waiting.test.ts). A new turn, or a prediction ahead again, ends it.
   */
  #noteOverdue(answer: GateAnswer): void {
    const overdue = answer.holdMs > 0 && answer.pttlMs !== -2 && answer.freeInMs === 0;
    if (!overdue) this.#overdue = undefined;
    else if (this.#overdue?.turns !== answer.turns) this.#overdue = { since: this.#o.clock.now(), turns: answer.turns };
  }

  /**
   * How long the other nodes are asked again after "held" while the gate is ours: the previous
   * holder's release is on its way to them. A few poll intervals, and never so long that the
   * validity left could fall under `minValidityMs`.
   */
  #retryHeld(holdMs: number): { retryHeldMs: number; retryHeldEveryMs: number } {
    const every = Math.max(MIN_POLL_MS, Math.min(this.#rtt / 2, this.#pollInterval(holdMs)));
    const o = this.#o;
    const budget =
      this.#request.ttlMs - driftMs(this.#request.ttlMs, o.driftFactor) - o.minValidityMs - 2 * o.requestTimeoutMs;
    // A release reaches the nodes within about a round trip of each other.
    return { retryHeldMs: Math.max(0, Math.min(budget, 2 * this.#rtt + every, 100)), retryHeldEveryMs: every };
  }

  /**
   * How long after the predicted release a take should land: twice the holds' average deviation
   * (landing before the release wastes a fan-out and a round trip), but at most a quarter of a
   * round trip.
   */
  #margin(answer: GateAnswer): number {
    return Math.min(Math.max(2 * answer.holdDeviationMs, MIN_MARGIN_MS), this.#rtt / 4);
  }

  /** Pause between two polls of the first in line: a fraction of the hold cycle. */
  #pollInterval(holdMs: number): number {
    const base = holdMs > 0 ? holdMs / 8 : this.#rtt;
    return Math.min(Math.max(base, MIN_POLL_MS), MAX_POLL_MS);
  }

  /** A waiter's place in line lasts until its next poll is overdue by this margin. */
  #leaseFor(nextPollMs: number): number {
    return nextPollMs + Math.max(2 * this.#o.requestTimeoutMs, 1000);
  }

  #hotWindow(holdMs: number): number {
    return Math.max(1000, 4 * holdMs);
  }

  /**
   * Without `acquireTimeoutMs`, waiting without the line moving (no release seen at the gate) ends
   * after as long as the retry settings would have waited between `maxAttempts` attempts: the sum
   * of the backoff's ceilings, `min(retryMaxDelayMs, retryBaseDelayMs * 2^(k-1))` for
   * k < maxAttempts (11.1 s by default). Every release starts it again, so a long line that moves
   * is waited out.
   */
  #patience(): number {
    const o = this.#o;
    let total = 0;
    for (let k = 1; k < Math.min(this.#maxAttempts, 64); k++) {
      total += Math.min(o.retryMaxDelayMs, o.retryBaseDelayMs * 2 ** (k - 1));
    }
    return Math.min(total, MAX_DELAY_MS);
  }

  /**
   * The line moved when the gate saw a release since our last poll: patience starts again. A
   * waiter ahead of us giving up is not progress (behind a holder that never lets go, the whole
   * line would otherwise wait in a chain), nor is an extension.
   */
  #noteProgress(answer: GateAnswer): void {
    if (this.#lastTurns >= 0 && answer.turns !== this.#lastTurns) {
      this.#patienceUntil = this.#o.clock.now() + this.#patience();
      this.#lookedPastPatience = false;
    }
    this.#lastTurns = answer.turns;
  }

  /** Another holder answered somewhere: waiting in line beats another fan-out. */
  #isContention(report: AttemptReport): boolean {
    return report.votes < this.#o.quorum && report.nodes.some((n) => n.outcome === "held");
  }

  /** Throws when the attempt says stop: a rejected token, the caller's abort, or no attempts left. */
  #checkAfterAttempt(report: AttemptReport): void {
    const configError = report.nodes.find((n) => n.error instanceof ConfigurationError)?.error;
    if (configError) throw this.#configurationError(configError as ConfigurationError);
    this.#checkAbort();
    if (this.#attempts >= this.#maxAttempts) throw failureError(this.#request.resources, this.#reports, this.#o.quorum);
  }

  #configurationError(error: ConfigurationError): ConfigurationError {
    return new ConfigurationError(error.message, { node: error.node, cause: error, attempts: this.#reports });
  }

  #checkAbort(): void {
    if (this.#signal?.aborted) {
      this.#leave();
      throw abortedError(this.#request.resources, this.#reports, this.#signal.reason);
    }
  }

  /**
   * Sleep `ms`, within the acquire deadline, the patience for waiting, and the caller's signal.
   * Past the deadline: `AcquireTimeoutError`. Past the patience, the waiter looks once more (its
   * sleep may have outlasted the patience while the line moved on) and gives up at the next pause
   * unless that poll found it further ahead.
   */
  async #pause(ms: number): Promise<void> {
    const patient = !this.#acquireTimeoutSet();
    if (patient && this.#lookedPastPatience && this.#o.clock.now() >= this.#patienceUntil) this.#giveUp();
    const limit = this.#pauseLimit();
    const now = this.#o.clock.now();
    if (ms > 0 && now < limit) await this.#sleep(Math.min(ms, limit - now));
    if (this.#o.clock.now() >= this.#deadline) {
      this.#leave();
      this.#timeOut();
    }
    if (patient && this.#o.clock.now() >= this.#patienceUntil) this.#lookedPastPatience = true;
  }

  /** Where a pause ends at the latest: the acquire deadline, or without one the patience. */
  #pauseLimit(): number {
    return Math.min(this.#deadline, this.#acquireTimeoutSet() ? Number.POSITIVE_INFINITY : this.#patienceUntil);
  }

  #giveUp(): never {
    this.#leave();
    // A caller that queued up at once (the key was hot) may give up before any fan-out: see
    // `#lastFanOutIfNone`.
    if (this.#reports.length === 0) throw new PatienceRanOut();
    throw failureError(this.#request.resources, this.#reports, this.#o.quorum);
  }

  #timeOut(): never {
    const last = this.#reports.at(-1);
    const attempts = this.#reports.length;
    throw new AcquireTimeoutError(
      `could not acquire ${this.#request.resources.join(", ")} within ${this.#o.acquireTimeoutMs} ms (${attempts} attempt${attempts === 1 ? "" : "s"})${last ? `: ${summary(last)}` : ""}`,
      this.#reports,
    );
  }

  async #sleep(ms: number): Promise<void> {
    try {
      await sleep(ms, this.#signal);
    } catch (reason) {
      this.#abandon(reason);
    }
  }

  /** The caller's signal aborted: leave the line and throw. */
  #abandon(reason: unknown): never {
    this.#leave();
    throw abortedError(this.#request.resources, this.#reports, reason);
  }

  #acquireTimeoutSet(): boolean {
    return this.#o.acquireTimeoutMs !== undefined;
  }

  /**
   * Leave the gate's line when done another way or giving up, so those behind us need not wait
   * for our lease to run out, and take our placeholder (if we left one) off the gate.
   */
  #leave(): void {
    const placeholder = this.#placeholderToken;
    if ((!this.#inLine && placeholder === undefined) || this.#gateDown) return;
    this.#inLine = false;
    this.#placeholderToken = undefined;
    const node = this.#engine.node(this.#gate);
    const work = this.#engine
      .fan(
        this.#o,
        "acquire",
        this.#request.resources,
        {
          yes: "acquired",
          task: async (_, context) => {
            await pollGate(
              node,
              this.#request.keys,
              { waiter: this.#waiter, mode: "leave", token: placeholder ?? "-", ttlMs: 1, leaseMs: 0, ticket: 0 },
              context,
            );
            return "acquired";
          },
        },
        this.#o.requestTimeoutMs,
        [this.#gate],
      )
      .outcomes.then(() => undefined);
    this.#engine.background.track(work, this.#o.requestTimeoutMs + 1000);
  }

  /** The retry policy's delay before the next fan-out: the caller's, checked, or full-jitter backoff. */
  #retryDelay(report: AttemptReport): number {
    const o = this.#o;
    const attempt = this.#attempts;
    if (!o.retryDelay) return fullJitterDelay(attempt, o.retryBaseDelayMs, o.retryMaxDelayMs, Math.random());
    let delay: unknown;
    try {
      delay = o.retryDelay({ attempt, report });
    } catch (cause) {
      throw new ConfigurationError("the retryDelay option threw", { cause, attempts: this.#reports });
    }
    if (delay === null) throw failureError(this.#request.resources, this.#reports, o.quorum);
    if (typeof delay !== "number" || !Number.isFinite(delay) || delay < 0 || delay > MAX_DELAY_MS) {
      throw new InvalidArgumentError(
        `retryDelay must return null or a number of milliseconds from 0 to ${MAX_DELAY_MS}, got ${String(delay)}`,
      );
    }
    return delay;
  }
}
