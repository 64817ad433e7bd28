/**
 * The waiter's driver: where a call starts (a plain fan-out, or straight in line for a resource
 * its isolate is busy with), one phase at a time, each phase's end turned into the next phase by
 * `phases.transition` alone.
 * @module
 */
import { endCall } from "../core/fanout.js";
import type { Lock } from "../core/lock.js";
import { failureError } from "../core/operations/acquire.js";
import { fanOut } from "./attempts.js";
import type { Place } from "./gate.js";
import { leave, setTicket } from "./gate-client.js";
import { sleepFor, waitInLine } from "./in-line.js";
import { abandon, checkAfterAttempt, PatienceRanOut } from "./limits.js";
import { type PhaseEnd, type Step, transition } from "./phases.js";
import { backOff, shouldWaitInLine } from "./retry.js";
import { nextEntryId, type Waiter } from "./state.js";

/**
 * The whole call: the lock, or the error that ended waiting. Counts the call as busy with its
 * resource in the isolate meanwhile, and the lock as held once granted, so that the isolate's next
 * acquisitions of it queue up at once.
 */
export async function runWaiter(w: Waiter): Promise<Lock> {
  const hot = w.hot;
  const now = w.startedAt;
  // Queue up at once for a resource this isolate just waited for, or is acquiring or holding for
  // another caller right now (a single attempt never waits).
  const queueAtOnce = hot.isHot(w.hotKey, now) || hot.isBusy(w.hotKey, now);
  // Our own entry lasts at most the attempts' deadline, in case we never get to leave it.
  const self = nextEntryId("acquiring");
  hot.occupy(w.hotKey, self, Math.min(w.deadline, now + w.o.requestTimeoutMs * w.maxAttempts), "acquiring");
  try {
    const lock = await drive(w, queueAtOnce);
    // Held until released, or until its deadline at most (an extension is not followed).
    hot.occupy(w.hotKey, lock.token, w.now() + lock.remainingMs(), "holding");
    return lock;
  } finally {
    hot.leave(w.hotKey, self);
    if (w.state.ticket > 0) hot.stopWaiting(w.hotKey, w.state.ticket);
    endCall(w.request.meter);
  }
}

/** Run phase after phase until one grants the lock; on any error, out of line with no placeholder left behind. */
async function drive(w: Waiter, queueAtOnce: boolean): Promise<Lock> {
  try {
    let step = await start(w, queueAtOnce);
    for (;;) {
      if (step.phase === "done") return step.lock;
      let end: PhaseEnd;
      try {
        end = await run(w, step);
      } catch (error) {
        // Only thrown while no fan-out has been made (see `limits.giveUp`).
        if (!(error instanceof PatienceRanOut)) throw error;
        end = { kind: "patience-ran-out" };
      }
      step = transition(step, end);
    }
  } catch (error) {
    leave(w);
    throw error;
  }
}

/**
 * The first step. A caller that queues up at once and whose last release kept it a place at the
 * back of the line sleeps as a poll from there would have told it to, and skips the poll.
 */
async function start(w: Waiter, queueAtOnce: boolean): Promise<Step> {
  if (w.maxAttempts <= 1 || !queueAtOnce) return { phase: "fan-out", after: "decide" };
  const place = await w.hot
    .takePlace<Place>(w.hotKey, w.o.clock, w.signal)
    .catch((reason: unknown) => abandon(w, reason));
  if (place === undefined) return { phase: "in-line", firstPollInMs: 0 };
  const s = w.state;
  w.waiterId = place.waiter;
  setTicket(w, place.ticket);
  s.inLine = true;
  s.firstInLine = place.answer.rank === 0;
  s.lastTurns = place.answer.turns;
  s.rttMs = place.rttMs;
  s.leaseUntil = place.at - place.rttMs + place.leaseMs;
  const elapsed = w.now() - place.at;
  return { phase: "in-line", firstPollInMs: Math.max(0, sleepFor(w, place.answer) - elapsed) };
}

/** One phase, to its end. */
async function run(w: Waiter, step: Exclude<Step, { phase: "done" }>): Promise<PhaseEnd> {
  switch (step.phase) {
    case "fan-out": {
      const result = await fanOut(w);
      if (result.lock) return { kind: "granted", lock: result.lock };
      checkAfterAttempt(w, result.report);
      return { kind: "refused", report: result.report, contention: shouldWaitInLine(w, result.report) };
    }
    case "in-line": {
      const ended = await waitInLine(w, step.firstPollInMs);
      if (ended === "gate-down") return { kind: "gate-down" };
      if (ended === "contested") return { kind: "contested", last: w.reports.at(-1) };
      return { kind: "granted", lock: ended };
    }
    case "backing-off": {
      const ended = await backOff(w, step.last);
      return ended === "in-line" ? { kind: "contention" } : { kind: "granted", lock: ended };
    }
    case "last-fan-out": {
      const last = await fanOut(w);
      if (last.lock) return { kind: "granted", lock: last.lock };
      checkAfterAttempt(w, last.report);
      throw failureError(w.request.resources, w.reports, w.o.quorum);
    }
  }
}
