/**
 * Waiting without the gate: fan-outs with the retry policy's delays in between (full-jitter
 * backoff, or the caller's `retryDelay`), and the test that sends a waiter back in line.
 * @module
 */

import type { AttemptReport } from "../base/report.js";
import { budgetedDelay, retryDelay } from "../core/backoff-waiting.js";
import type { Lock } from "../core/lock.js";
import { fanOut } from "./attempts.js";
import { checkAfterAttempt, sleepWithin, timeOut } from "./limits.js";
import type { Waiter } from "./state.js";

/** Another holder answered somewhere: waiting in line beats another fan-out. */
function isContention(w: Waiter, report: AttemptReport): boolean {
  return report.votes < w.o.quorum && report.nodes.some((n) => n.outcome === "held");
}

/**
 * Another holder answered and the gate is up: wait in line, whatever the retry options (they pace
 * fan-outs while nodes fail, and bound the wait: see `limits.patienceMs`). Fenced locks too: they
 * only queue up at the gate, and take their turn with a fenced attempt (see `in-line.ts`).
 */
export function shouldWaitInLine(w: Waiter, report: AttemptReport): boolean {
  const s = w.state;
  return !s.gateDown && !s.foreign && isContention(w, report);
}

/**
 * Fan-outs with the retry policy's delays in between, after the failed attempt `last`: the lock,
 * or `in-line` once the lock is held elsewhere with the gate usable.
 */
export async function backOff(w: Waiter, last: AttemptReport): Promise<Lock | "in-line"> {
  let report = last;
  for (;;) {
    const delay = delayAfter(w, report);
    // As retries always did: give up at once when the delay would cross the acquire deadline.
    if (w.now() + delay >= w.deadline) timeOut(w);
    await sleepWithin(w, delay);
    // The gate answered the last fan-out after its vote was decided (see `attempts.fanOut`).
    if (shouldWaitInLine(w, report)) return "in-line";
    const result = await fanOut(w);
    if (result.lock) return result.lock;
    checkAfterAttempt(w, result.report);
    // Nodes that failed are back and answer that the lock is held: wait in line after all.
    if (shouldWaitInLine(w, result.report)) return "in-line";
    report = result.report;
  }
}

/**
 * The retry policy's delay before the next fan-out, or longer when the request budget allows
 * fewer fan-outs than the policy has left (see `core/backoff-waiting.budgetedDelay`): by the
 * policy's pace alone, waiters whose gate failed spent their budget within a second, against
 * each other.
 */
function delayAfter(w: Waiter, report: AttemptReport): number {
  const { o, state } = w;
  const delay = retryDelay(o, state.attempts, report, w.reports, w.request.resources);
  const nodeCount = w.engine.nodes.length;
  const sent = w.requestsSent();
  return Math.max(
    delay,
    budgetedDelay(o, w.now(), sent, w.takeCost, nodeCount, w.maxAttempts, state.attempts, w.startedAt, w.deadline),
  );
}
