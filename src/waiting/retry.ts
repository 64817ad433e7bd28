/**
 * Waiting without the gate: fan-outs with the retry policy's delays in between (full-jitter
 * backoff, or the caller's `retryDelay`), and the test that sends a waiter back in line. A fenced
 * waiter, whose fan-out costs two rounds, asks one node at a time whether the lock is still held
 * and fans out once it is free.
 * @module
 */

import type { AttemptReport } from "../base/report.js";
import { budgetedDelay, retryDelay } from "../core/backoff-waiting.js";
import type { Lock } from "../core/lock.js";
import { fanOut } from "./attempts.js";
import {
  checkAfterAttempt,
  pauseLimit,
  pollsLeft,
  roomForPoll,
  sleepWithin,
  startPatience,
  timeOut,
} from "./limits.js";
import { budgetGap, MAX_POLLS_PER_SECOND } from "./pacing.js";
import { stillHeld } from "./probes.js";
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
 * Fan-outs with the retry policy's delays in between, after the failed attempt `last` (probes in
 * between for a fenced lock): the lock, or `in-line` once the lock is held elsewhere with the gate
 * usable.
 */
export async function backOff(w: Waiter, last: AttemptReport): Promise<Lock | "in-line"> {
  let report = last;
  let probes = 0;
  for (;;) {
    // Probes while the patience lasts (fan-outs do not run out while the lock is held), paced as
    // polls: at most 10 a second, spaced to last within the budget. Then fan-outs as before.
    let held = heldNodes(w, report);
    if (held.length > 0) startPatience(w);
    if (w.now() >= pauseLimit(w)) held = [];
    const delay = held.length > 0 ? probeGap(w) : delayAfter(w, report);
    // As retries always did: give up at once when the delay would cross the acquire deadline.
    if (w.now() + delay >= w.deadline) timeOut(w);
    await sleepWithin(w, delay);
    // The gate answered the last fan-out after its vote was decided (see `attempts.fanOut`), or
    // a probe (below).
    if (shouldWaitInLine(w, report)) return "in-line";
    if (held.length > 0 && (await stillHeld(w, probeTarget(w, held, probes++)))) continue;
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

/** Every this many probes, one asks the gate, which is back when it answers (see {@link probeTarget}). */
const GATE_PROBE_EVERY = 4;

/**
 * The node a waiter's `turn`-th probe asks: the nodes that said "held" in turn, so that a key left
 * on one node alone cannot hold the waiter off, and every few turns the gate, to find it back.
 */
function probeTarget(w: Waiter, held: readonly number[], turn: number): number {
  return turn % GATE_PROBE_EVERY === GATE_PROBE_EVERY - 1 ? w.gate : (held[turn % held.length] as number);
}

/**
 * The gap before the next probe: a poll's, spaced to last within the budget (see
 * `pacing.budgetGap`), jittered by ±50 % so that waiters that fell back together do not probe, and
 * fan out on a free lock, in step.
 */
function probeGap(w: Waiter): number {
  const now = w.now();
  const gap = budgetGap(now - w.startedAt, pauseLimit(w) - now, pollsLeft(w)) * (0.5 + Math.random());
  return Math.max(1000 / MAX_POLLS_PER_SECOND, gap);
}

/**
 * The nodes a probe may ask whether the lock is still held (see {@link stillHeld}): those that
 * said "held" in the last fan-out, the gate aside, for a fenced lock of one key; none when the
 * budget has no room for a probe and a fan-out after it. A plain lock's fan-out costs half a
 * fenced one's, and with the gate failing, probes served fewer plain calls than fan-outs spread
 * over the budget (62 against 79 of 80 on fake time, 8 isolates, seeds 1-10): they found the
 * lock free together more often than the spread fan-outs met.
 */
function heldNodes(w: Waiter, report: AttemptReport): number[] {
  if (!w.o.fencing || w.request.keys.length !== 1) return [];
  if (!roomForPoll(w)) return [];
  return report.nodes.flatMap((n, i) => (n.outcome === "held" && i !== w.gate ? [i] : []));
}
