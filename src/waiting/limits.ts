/**
 * What ends waiting without a lock: the attempts, the acquire deadline, the patience for a line
 * that does not move, a rejected configuration, and the caller's signal. Every way out leaves the
 * gate's line first; and every pause of a waiter goes through {@link pause}, which keeps to them.
 * @module
 */
import type { AttemptReport } from "../base/report.js";
import { sleep } from "../base/signals.js";
import { patience } from "../core/backoff.js";
import { acquireTimeout, checkBudget, policyDelay, stopAfter } from "../core/backoff-waiting.js";
import { abortedError, failureError } from "../core/operations/acquire.js";
import { MAX_DELAY_MS, withinBudget } from "../core/options.js";
import type { GateAnswer } from "./gate.js";
import { leave } from "./gate-client.js";
import { MAX_POLL_MS } from "./pacing.js";
import type { Waiter } from "./state.js";

/** Waiting in line ended before any fan-out: the driver makes one last (see `phases.ts`); never leaves the waiter. */
export class PatienceRanOut extends Error {}

/**
 * The patience for waiting without progress, in ms: as long as the retry options would have
 * waited between `maxAttempts` attempts. With the default backoff, the sum of its ceilings (see
 * `pacing.patience`); with a custom `retryDelay`, the sum of the delays it gives for attempts 1 to
 * `maxAttempts - 1` (asked once per attempt number, with the last attempt's report; up to a
 * `null`), or the default's while no attempt has been made.
 */
function patienceMs(w: Waiter): number {
  const o = w.o;
  const last = w.reports.at(-1);
  if (o.retryDelay === undefined || last === undefined) {
    return patience(w.maxAttempts, o.retryBaseDelayMs, o.retryMaxDelayMs);
  }
  let total = 0;
  for (let attempt = 1; attempt < Math.min(w.maxAttempts, 64); attempt++) {
    const delay = policyDelay(o, attempt, last, w.reports);
    if (delay === null) break;
    total += delay;
  }
  return Math.min(total, MAX_DELAY_MS);
}

/** Start the patience when the waiter first waits in line (it runs from then on). */
export function startPatience(w: Waiter): void {
  if (w.state.patienceUntil === Number.POSITIVE_INFINITY) w.state.patienceUntil = w.now() + patienceMs(w);
}

/**
 * The line moved when the gate saw a release since our last poll: patience starts again. A
 * waiter ahead of us giving up is not progress (behind a holder that never lets go, the whole
 * line would otherwise wait in a chain), nor is an extension.
 */
export function noteProgress(w: Waiter, answer: GateAnswer): void {
  const s = w.state;
  if (s.lastTurns >= 0 && answer.turns !== s.lastTurns) {
    s.patienceUntil = w.now() + patienceMs(w);
    s.lookedPastPatience = false;
  }
  s.lastTurns = answer.turns;
}

/**
 * Whether the patience bounds the wait: when the attempts are bounded (`maxAttempts`, given or by
 * default). With `acquireTimeoutMs` alone, the attempts are not, and the deadline alone bounds it.
 */
function isPatient(w: Waiter): boolean {
  return w.maxAttempts !== Number.POSITIVE_INFINITY;
}

/** Where a pause ends at the latest: the acquire deadline, or the patience when it is shorter. */
export function pauseLimit(w: Waiter): number {
  return Math.min(w.deadline, isPatient(w) ? w.state.patienceUntil : Number.POSITIVE_INFINITY);
}

/**
 * Sleep `ms`, within the acquire deadline, the patience for waiting, and the caller's signal.
 * Past the deadline: `AcquireTimeoutError`. Past the patience, the waiter looks once more (its
 * sleep may have outlasted the patience while the line moved on) and gives up at the next pause
 * unless that poll found it further ahead.
 */
export async function pause(w: Waiter, ms: number): Promise<void> {
  const s = w.state;
  const patient = isPatient(w);
  if (patient && s.lookedPastPatience && w.now() >= s.patienceUntil) giveUp(w);
  const limit = pauseLimit(w);
  const now = w.now();
  if (ms > 0 && now < limit) await sleepWithin(w, Math.min(ms, limit - now));
  if (w.now() >= w.deadline) {
    leave(w);
    timeOut(w);
  }
  if (patient && w.now() >= s.patienceUntil) s.lookedPastPatience = true;
}

/** Sleep `ms`, or abandon when the caller's signal aborts first. */
export async function sleepWithin(w: Waiter, ms: number): Promise<void> {
  try {
    await sleep(ms, w.signal);
  } catch (reason) {
    abandon(w, reason);
  }
}

/** The caller's signal aborted: leave the line and throw. */
export function abandon(w: Waiter, reason: unknown): never {
  leave(w);
  throw abortedError(w.request.resources, w.reports, reason);
}

/**
 * Whether the request budget has room for one more poll and the take after it, with the lock's
 * release kept: when it has not, waiting ends (see {@link noRoomLeft}), never in the middle of a
 * turn.
 */
export function roomForPoll(w: Waiter): boolean {
  return withinBudget(w.o, w.requestsSent(), 1 + w.takeCost, w.engine.nodes.length);
}

/**
 * Whether the request budget has room for a poll that takes a gate out of step (the poll, the
 * `PTTL` probe and the request that shortens our key to a placeholder: see `probes.keptOutOfStep`)
 * and still one more poll and take, the lock's release kept.
 */
export function roomForOutOfStepPoll(w: Waiter): boolean {
  return withinBudget(w.o, w.requestsSent(), OUT_OF_STEP_POLL + 1 + w.takeCost, w.engine.nodes.length);
}

/** Requests of a poll that takes a gate out of step while the keys are still held elsewhere. */
export const OUT_OF_STEP_POLL = 3;

/**
 * The polls (or probes) the request budget still allows, with the fan-out of a take and the
 * lock's release kept in reserve: what `pacing.budgetGap` spaces over the rest of the wait.
 */
export function pollsLeft(w: Waiter): number {
  return w.o.requestBudget - w.requestsSent() - w.takeCost - w.engine.nodes.length;
}

/**
 * Whether the request budget has room for a take aimed at a release (a fan-out) and, should it
 * land early, its cleanup, a poll and the take after it, the lock's release kept. A take refused
 * by the holder's keys leaves at most `quorum - 1` nodes that said yes or had not answered, each
 * undone by one request. Without that room the waiter polls instead: a poll costs one request
 * where an aimed take costs one per node, and a take that came early with nothing left to follow
 * it up ends the call. Never for a fenced lock: its take is a fenced attempt after a poll that
 * found the lock free (see `in-line.ts`).
 */
export function roomForAim(w: Waiter): boolean {
  const nodeCount = w.engine.nodes.length;
  const earlyTake = nodeCount + w.o.quorum - 1;
  return !w.o.fencing && withinBudget(w.o, w.requestsSent(), earlyTake + 1 + nodeCount, nodeCount);
}

/**
 * No room is left for a poll and the take after it: nothing more this call may send can get it
 * the lock. Before the end of the wait, the `RequestBudgetError` is thrown now, and the waiter
 * leaves the line as on every error (see `waiter.ts`): asleep for the rest of its patience
 * instead, it stayed first in line until its place ran out, and the line behind it moved only by
 * the gate's rule for a first in line that does not come. At the end (the budget's spacing
 * spends the last poll there), the wait ends as the patience or the deadline ends it.
 */
export async function noRoomLeft(w: Waiter): Promise<never> {
  const waitLeftMs = pauseLimit(w) - w.now();
  if (waitLeftMs > MAX_POLL_MS) {
    const nodeCount = w.engine.nodes.length;
    checkBudget(w.request, w.reports, w.requestsSent(), 1 + w.takeCost, nodeCount);
  }
  await pause(w, waitLeftMs);
  return giveUp(w);
}

/** Waiting ends without a lock: the failure of the attempts made, or one last attempt when none was. */
export function giveUp(w: Waiter): never {
  leave(w);
  // A caller that queued up at once (the key was hot) may give up before any fan-out.
  if (w.reports.length === 0) throw new PatienceRanOut();
  throw failureError(w.request.resources, w.reports, w.o.quorum);
}

/** The acquire deadline passed: `AcquireTimeoutError`, with the attempts made. */
export function timeOut(w: Waiter): never {
  throw acquireTimeout(w.request, w.reports);
}

/** Throws `AbortedError` when the caller's signal has aborted (leaving the line first). */
export function checkAbort(w: Waiter): void {
  if (w.signal?.aborted) {
    leave(w);
    throw abortedError(w.request.resources, w.reports, w.signal.reason);
  }
}

/** Throws when the attempt says stop: a rejected token, the caller's abort, or no attempts left. */
export function checkAfterAttempt(w: Waiter, report: AttemptReport): void {
  stopAfter(w.request, report, w.reports, w.signal, w.state.attempts >= w.maxAttempts);
}
