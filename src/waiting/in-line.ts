/**
 * Waiting in line at the gate: poll until it is our turn, then take the lock (a poll that finds it
 * free takes the gate node, and the other nodes follow), aim a take at the predicted release, or
 * take it over from a release in our isolate (see `offers.ts`).
 * @module
 */
import { AbortedError, ConfigurationError } from "../base/errors.js";
import type { NodeOutcomeKind } from "../base/report.js";
import { sleep } from "../base/signals.js";
import { withAttempts } from "../core/backoff-waiting.js";
import type { TaskContext } from "../core/fanout.js";
import { Lock } from "../core/lock.js";
import type { GateRole } from "../core/operations/acquire.js";
import { withinBudget } from "../core/options.js";
import { randomToken } from "../core/token.js";
import { fanOut } from "./attempts.js";
import { type GateAnswer, releaseOnItsWay } from "./gate.js";
import { currentPlaceholderMs, growPlaceholder, leave, poll, pollOn } from "./gate-client.js";
import {
  abandon,
  checkAbort,
  checkAfterAttempt,
  noRoomLeft,
  noteProgress,
  OUT_OF_STEP_POLL,
  pauseLimit,
  pollsLeft,
  roomForAim,
  roomForOutOfStepPoll,
  roomForPoll,
  startPatience,
} from "./limits.js";
import { type HandedOver, offerWindowEnd, pauseOrTakeOver, takeOver } from "./offers.js";
import {
  budgetGap,
  gateNearerThanQuorum,
  hotWindow,
  isOverdue,
  leaseFor,
  margin,
  nextOverdue,
  pollInterval,
  quorumRtt,
  rateGap,
  releaseImminent,
  releaseInReach,
  retryHeld,
  sleepAtHead,
  sleepBehind,
  spacingHorizon,
  takeDelays,
  unspacedAtFront,
} from "./pacing.js";
import { keptOutOfStep } from "./probes.js";
import type { Waiter } from "./state.js";

/**
 * Poll the gate until it is our turn, then take the lock; the first poll `firstPollInMs` from now.
 * Ends with the lock, `gate-down` when the gate did not answer, or `contested` when another
 * resource set holds some of our keys (we have left the line then).
 */
export async function waitInLine(w: Waiter, firstPollInMs = 0): Promise<Lock | "gate-down" | "contested"> {
  const s = w.state;
  const hot = w.hot;
  startPatience(w);
  hot.mark(w.hotKey, w.now(), hotWindow(0));
  let nextPollMs = firstPollInMs;
  // The next poll lands at a predicted release in place of a take aimed there (1), or just after
  // it, the one before having found the holder not yet through (2): the budget's spacing, which
  // plans polls for a wait of unknown length, does not put it off. 0 otherwise.
  let atRelease = 0;
  // Polls sent near the front of the line (second place or first) in the line's present turn:
  // the first few are not put off by the budget's spacing either. Far into a long wait that
  // spacing grows past a hundred ms (see docs/waiting.md), and a waiter that became first
  // came for its turn that late, after the gate had given the lock to whoever polled first.
  let frontTurn = -1;
  let frontPolls = 0;
  for (;;) {
    // While our own placeholder holds the gate, a poll would only find it there. While a holder
    // in this isolate has the lock, the first in line waits for its release to hand it over,
    // with no poll (by the holder's deadline at most: a holder that never releases lets its
    // lock run out).
    const now = w.now();
    const placeholderMs = s.placeholderUntil - now;
    const first = s.firstInLine && placeholderMs <= 0;
    const heldHereMs = first && w.offersHandoff ? offerWindowEnd(w, now) - now : 0;
    // Only a hand-over in this isolate could still get a waiter the lock without room for a poll.
    if (heldHereMs <= 0 && !roomForPoll(w)) await noRoomLeft(w);
    const spacedMs =
      atRelease > 0 ? 0 : (s.recentPolls.at(-1) ?? Number.NEGATIVE_INFINITY) + budgetGapFor(w, frontPolls) - now;
    const pacedMs = Math.max(pollAtExpiry(w, spacedMs, now), rateGap(s.recentPolls, now, s.rank));
    const handedOver = await pauseOrTakeOver(w, Math.max(nextPollMs, placeholderMs, heldHereMs, pacedMs), first);
    if (handedOver) {
      const lock = await takeTurn(w, handedOver);
      if (lock) return lock;
      nextPollMs = pollInterval(s.holdMs, s.rttMs);
      continue;
    }
    if (!roomForPoll(w)) await noRoomLeft(w);
    // Callers of this isolate that join the line together take turns to send their first polls.
    const joined = s.inLine
      ? undefined
      : await hot
          .joinSlot(w.hotKey, w.o.clock, w.o.requestTimeoutMs, w.signal)
          .catch((reason: unknown) => abandon(w, reason));
    if (joined === "gate-down") {
      s.gateDown = true;
      return "gate-down";
    }
    const sentAt = w.now();
    const token = randomToken();
    let answer: GateAnswer;
    try {
      // While a sibling's plain fan-out may still be on its way to the gate, only queue up:
      // taking the gate before its `SET NX` lands there would split the nodes between us (it
      // wins the others, our placeholder holds the gate, and the line waits for that).
      const racing = hot.isRacing(w.hotKey, sentAt);
      answer = await poll(w, racing ? "wait" : "take", token, leaseFor(nextPollMs, w.o.requestTimeoutMs));
    } catch (error) {
      const gateDown = !(error instanceof ConfigurationError || error instanceof AbortedError);
      joined?.(!gateDown);
      if (error instanceof ConfigurationError) throw withAttempts(error, w.reports);
      if (error instanceof AbortedError) {
        // The poll may have taken the gate before the abort cut its answer off: leaving the line
        // (see `waiter.ts`) deletes a key with its token there, or the line would wait a TTL.
        // (Our own placeholder had run out: we poll only once it has.)
        s.placeholderToken = token;
        throw error;
      }
      // The gate is down or slow: never wait on it longer than one request deadline.
      s.gateDown = true;
      return "gate-down";
    }
    joined?.(true);
    const polledAtRelease = atRelease;
    atRelease = 0;
    if (answer.turns !== frontTurn) {
      frontTurn = answer.turns;
      frontPolls = 0;
    }
    if (!answer.taken && answer.rank <= 1) frontPolls++;
    const answeredAt = w.now();
    hot.mark(w.hotKey, answeredAt, hotWindow(answer.holdMs));
    s.holdMs = answer.holdMs;
    s.cycleMs = answer.cycleMs;
    if (answer.taken) leaveIfAborted(w, token);
    if (answer.taken && w.o.fencing) {
      // A gate out of step: as for a plain take below, our key stays there as a placeholder while
      // the holder that won without it still has the others, instead of a fenced attempt (2N).
      if (await keptOutOfStep(w, token)) {
        nextPollMs = pollInterval(answer.holdMs, s.rttMs);
        continue;
      }
      leaveIfAborted(w, token);
      // The poll set the keys on the gate: a fenced attempt with its token follows (the gate's
      // phase 1 finds the keys its own), validity counted from the poll's send. One that fails
      // cleans up everywhere, the gate included, and the waiter polls again with its ticket.
      const result = await fanOut(w, undefined, undefined, { token, startedAt: sentAt });
      if (result.lock) return result.lock;
      checkAfterAttempt(w, result.report);
      nextPollMs = pollInterval(answer.holdMs, s.rttMs);
      continue;
    }
    if (answer.taken) {
      // A gate out of step: while the holder that won without it still has the others, our key
      // stays there as a placeholder at the cost of two requests, not a fan-out.
      if (await keptOutOfStep(w, token)) {
        nextPollMs = pollInterval(answer.holdMs, s.rttMs);
        continue;
      }
      // Aborted while it asked: leave with the key the poll set (as just after the poll).
      leaveIfAborted(w, token);
      // The poll set the keys on the gate: the other nodes follow, and validity counts from
      // the poll's send.
      const result = await fanOut(w, {
        index: w.gate,
        token,
        startedAt: sentAt,
        takenAt: answeredAt,
        placeholderMs: () => currentPlaceholderMs(w),
        task: async () => "acquired",
        // Ask the others again only when the previous holder just released through the gate:
        // its release is on its way to them. A gate free with no release is out of step.
        gateTaken: () => releaseOnItsWay(answer, w.o.requestTimeoutMs),
        ...retryHeldFor(w, answer.holdMs),
      });
      if (result.lock) return result.lock;
      checkAfterAttempt(w, result.report);
      await growPlaceholder(w, result, token);
      nextPollMs = pollInterval(answer.holdMs, s.rttMs);
      continue;
    }
    noteProgress(w, answer);
    s.overdue = nextOverdue(answer, s.overdue, w.now());
    if (answer.contested) {
      // Some of our keys are held by another resource set: its line waits at another gate, and
      // its releases never pass through ours, so a line here would wait for turns it never sees
      // while that line's takes keep the shared keys (the bench's overlapping sets: 0–3 % of the
      // grants for one set in some runs). Leave, and back off for the rest of this call.
      s.foreign = true;
      leave(w);
      return "contested";
    }
    const interval = pollInterval(answer.holdMs, s.rttMs);
    if (releaseInReach(answer)) {
      // First in line, and the gate expects the lock to free up: be there when it does, with a
      // fan-out to every node that takes the gate node in the same round trip. A request sent
      // `freeIn` after the poll was sent reaches the gate `freeIn` after the poll did, whatever
      // the split of the round trip between the two ways; a margin of twice the holds' average
      // deviation makes landing before the release (a wasted fan-out) the exception.
      // A holder in this isolate hands the lock over in its release: a take aimed at that
      // release would only race it.
      if (w.offersHandoff && hot.heldHereFor(w.hotKey, sentAt) > 0) {
        nextPollMs = 0;
        continue;
      }
      const aimAt = sentAt + answer.freeInMs + margin(answer.holdDeviationMs, s.rttMs);
      if (!roomForAim(w)) {
        // A budget that could not follow up a take that came early: a poll lands there instead
        // (a poll that finds the lock free takes the gate, and the other nodes follow), a
        // quarter of a hold late, as the gate keeps a free lock for its first in line half a
        // hold and a poll that came early is followed by the budget's spacing. That spacing
        // does not put it off: by it, the first in line came seconds late, and every turn
        // went by the gate's rule for a first in line that does not come.
        nextPollMs = Math.max(aimAt, sentAt + answer.freeInMs + answer.holdMs / 4) - w.now();
        atRelease = 1;
        continue;
      }
      // Its requests land together when the gate's does: the take starts the gate's delay
      // earlier, with the farthest node's request (see `pacing.takeDelays`).
      const delays = takeDelays(hot.nodeRtts(), w.engine.nodes.length);
      const start = aimAt - (delays?.[w.gate] ?? 0);
      const handedOver = await pauseOrTakeOver(w, Math.max(0, start - w.now()), true);
      const lock = await takeTurn(w, handedOver, delays);
      if (lock) return lock;
      nextPollMs = interval;
      continue;
    }
    if (polledAtRelease === 1 && answer.rank === 0 && isOverdue(answer)) {
      // Came before the release it was sent for: once more, a quarter of a hold later.
      nextPollMs = Math.max(interval, answer.holdMs / 4);
      atRelease = 2;
      continue;
    }
    nextPollMs = sleepFor(w, answer);
  }
}

/**
 * The wait before the next poll, `spacedMs` as the budget spaces it, but no later than the expiry
 * that a probe read of the keys of a holder that won without the gate (see `probes.keptOutOfStep`):
 * a poll then finds them gone when the holder died, and takes the lock, where a poll spaced over
 * the rest of the patience came seconds later. Only when the budget has room for such a turn (a
 * poll that takes the gate out of step, see `limits.OUT_OF_STEP_POLL`) and one more poll and take:
 * otherwise that last turn goes to the end of the patience, which a holder that extends its keys
 * may reach, where at the expiry it would find them extended and the call would give up. Keys
 * found past an expiry read are taken to be extended, and expiries are not waited for after that.
 */
function pollAtExpiry(w: Waiter, spacedMs: number, now: number): number {
  const expiresInMs = w.state.heldElsewhereUntil - now;
  if (!(expiresInMs > 0 && Number.isFinite(expiresInMs)) || !roomForOutOfStepPoll(w)) return spacedMs;
  return Math.min(spacedMs, expiresInMs);
}

/**
 * The caller's signal aborted as the poll that took the gate with `token` came back: leave the
 * line, deleting that key, and throw (the attempt that would follow checks the signal first, and
 * a take's key is no placeholder that leaving would delete).
 */
function leaveIfAborted(w: Waiter, token: string): void {
  if (!w.signal?.aborted) return;
  w.state.placeholderToken = token;
  checkAbort(w);
}

/**
 * The least gap from our last poll to the next that the request budget asks (see
 * `pacing.budgetGap`): the polls it still allows keep the fan-out of a take and the lock's release
 * in reserve, spread over the rest of the wait, as the line's pace predicts it while it moves (see
 * `pacing.spacingHorizon`). None for the first polls of a turn near the front (`frontPolls` sent so
 * far, see `pacing.unspacedAtFront`). While the gate is out of step (our last take found it taken
 * with no release since), a poll is counted as the out-of-step turn it most likely starts (see
 * `limits.OUT_OF_STEP_POLL`): counted as one request, such turns spend the budget three times as
 * fast as planned, and behind a holder that extends its keys around the gate the call gives up
 * before that holder lets go.
 */
function budgetGapFor(w: Waiter, frontPolls: number): number {
  const s = w.state;
  const left = s.unreleasedTakes > 0 ? Math.floor(pollsLeft(w) / OUT_OF_STEP_POLL) : pollsLeft(w);
  if (unspacedAtFront(s.rank, frontPolls, left)) return 0;
  const now = w.now();
  const horizon = spacingHorizon(s.rank, s.holdMs, s.cycleMs, rttToQuorum(w), overdueFor(w, now) ?? 0);
  return budgetGap(now - w.startedAt, Math.min(pauseLimit(w) - now, horizon), left);
}

/**
 * How long to sleep before the next poll, from our place in line (see `pacing.sleepAtHead` and
 * `pacing.sleepBehind`); records since when we are first in line.
 */
export function sleepFor(w: Waiter, answer: GateAnswer): number {
  const s = w.state;
  const now = w.now();
  const overdueForMs = overdueFor(w, now);
  if (answer.rank <= 0) {
    s.headSince ??= now;
    return sleepAtHead(answer, s.rttMs, now - s.headSince, overdueForMs);
  }
  s.headSince = undefined;
  return sleepBehind(answer, s.rttMs, overdueForMs, Math.random(), rttToQuorum(w));
}

/** Our round trip to a quorum of the nodes (see `pacing.quorumRtt`), the gate's while theirs are unknown. */
function rttToQuorum(w: Waiter): number {
  return quorumRtt(w.hot.nodeRtts(), w.engine.nodes.length, w.o.quorum) ?? w.state.rttMs;
}

/** How long polls have found the holder past the gate's prediction at `now`, if they have (see `pacing.nextOverdue`). */
function overdueFor(w: Waiter, now: number): number | undefined {
  const overdue = w.state.overdue;
  return overdue === undefined ? undefined : now - overdue.since;
}

type RetryHeld = Pick<GateRole, "retryHeldMs" | "retryHeldEveryMs" | "mayAskAgain">;

/**
 * How the nodes are asked again after "held" in an attempt while the gate is ours, or due (see
 * `pacing.retryHeld`), and how many times in all. Each within the request budget with the lock's
 * release; and in all, no more than what the budget keeps past this attempt (`limits.pollsLeft`)
 * beyond one more turn: the cleanup of this attempt should it fail (up to `quorum - 1` requests),
 * a poll and a take. Asked for all the budget allows, a call behind a release late to the other
 * nodes would have no room left for the turn that finds it landed, and would give up with
 * `RequestBudgetError` before its patience. When the budget cannot keep that turn anyway, this
 * attempt is the call's last, and the nodes are asked again for as long as the budget allows.
 */
function retryHeldFor(w: Waiter, holdMs: number): RetryHeld {
  const o = w.o;
  const pace = retryHeld({
    holdMs,
    rttMs: w.state.rttMs,
    ttlMs: w.request.ttlMs,
    driftFactor: o.driftFactor,
    minValidityMs: o.minValidityMs,
    requestTimeoutMs: o.requestTimeoutMs,
  });
  const cleanup = o.quorum - 1;
  const nextTurn = cleanup + 1 + w.takeCost;
  const spare = pollsLeft(w);
  let left = spare >= nextTurn ? spare - nextTurn : Number.POSITIVE_INFINITY;
  const mayAskAgain = () => {
    if (left < 1 || !withinBudget(o, w.requestsSent(), 1, w.engine.nodes.length)) return false;
    left--;
    return true;
  };
  return { ...pace, mayAskAgain };
}

/**
 * Our turn, as a pause ended: the attempt a release made for us by handing the lock over, or,
 * when the lock is free (or its release is due), a take aimed at it.
 */
function takeTurn(w: Waiter, turn: HandedOver | "free" | undefined, delays?: number[]): Promise<Lock | undefined> {
  if (turn === "free") return takeAtRelease(w);
  return turn === undefined ? takeAtRelease(w, delays) : takeOver(w, turn);
}

/**
 * A take aimed at a release, each node's request sent by `delays` (see `pacing.takeDelays`). If it
 * came too early (the holder is past its usual hold), its release is most likely on the way by the
 * time our answer is back: one more take at once, to every node (costs the same requests as a poll
 * and the fan-out after it, a round trip sooner), when the budget could still follow it up (see
 * `limits.roomForAim`); after that, polls.
 */
async function takeAtRelease(w: Waiter, delays?: number[]): Promise<Lock | undefined> {
  const early = await speculativeTake(w, delays);
  if (early === undefined || early instanceof Lock) return early;
  if (!roomForAim(w)) return undefined;
  const again = await speculativeTake(w);
  return again instanceof Lock ? again : undefined;
}

/**
 * A fan-out in which the gate node gets an aim-mode poll instead of `SET NX`. Returns the lock,
 * or the gate's answer when it came too early (first in line, the lock still held past its
 * predicted release), or nothing.
 */
async function speculativeTake(w: Waiter, delays?: number[]): Promise<Lock | GateAnswer | undefined> {
  const s = w.state;
  const token = randomToken();
  let answer: GateAnswer | undefined;
  // The others' answers may come back before the gate's: a node that says "held" waits for it
  // to learn whether the release is on its way (see `GateRole.gateTaken`).
  let gateAnswered: (taken: boolean) => void = () => {};
  const gateTaken = new Promise<boolean>((resolve) => {
    gateAnswered = resolve;
  });
  const retry = retryHeldFor(w, s.holdMs);
  const askAgain = gateNearerThanQuorum(w.hot.nodeRtts(), w.engine.nodes.length, w.gate, w.o.quorum);
  let gateTrying = askAgain;
  const result = await fanOut(w, {
    index: w.gate,
    token,
    placeholderMs: () => currentPlaceholderMs(w),
    gateTaken: () => gateTaken,
    gateTrying: () => gateTrying,
    sendDelaysMs: delays,
    ...retry,
    task: async (context: TaskContext): Promise<NodeOutcomeKind> => {
      try {
        const leaseMs = leaseFor(pollInterval(0, s.rttMs), w.o.requestTimeoutMs);
        const until = w.now() + retry.retryHeldMs;
        // Landed before a release that is due, with the gate much nearer than a quorum: ask it
        // again in this attempt (see `pacing.gateNearerThanQuorum`), within the request budget,
        // checked right before the send (the other nodes asked again meanwhile have sent since
        // any earlier check, see `acquireBehindGate`).
        for (;;) {
          answer = await pollOn(w, context, "aim", token, leaseMs);
          if (!askAgain || answer.taken || !releaseImminent(answer, s.rttMs)) break;
          if (w.now() + retry.retryHeldEveryMs > until) break;
          await sleep(retry.retryHeldEveryMs, context.signal);
          if (!retry.mayAskAgain()) break;
        }
        return answer.taken ? "acquired" : "held";
      } finally {
        gateTrying = false;
        gateAnswered(answer !== undefined && releaseOnItsWay(answer, w.o.requestTimeoutMs));
      }
    },
  });
  if (result.lock) return result.lock;
  checkAfterAttempt(w, result.report);
  if (answer === undefined) return undefined;
  noteProgress(w, answer);
  if (answer.taken) await growPlaceholder(w, result, token);
  else if (releaseImminent(answer, s.rttMs)) return answer;
  return undefined;
}
