/**
 * The waiter's side of a hand-over (see `handoff.ts`): while it pauses first in line, it offers a
 * token of its own to the isolate's hot resources, and a release of the lock in this isolate takes
 * the offer up, setting our keys where it deletes its own: a round trip sooner than a take sent
 * after the release, and never before it. A waiter further back listens for the release that makes
 * it first in line, and offers from then on.
 *
 * A lock of several resources is never handed over: a resource set that shares a key with ours
 * waits in another line, and a lock handed from release to release would keep that key from it for
 * good.
 * @module
 */

import type { NodeOutcomeKind } from "../base/report.js";
import { within } from "../base/signals.js";
import type { Lock } from "../core/lock.js";
import { type AttemptResult, attemptAcquire, type GateRole } from "../core/operations/acquire.js";
import { randomToken } from "../core/token.js";
import type { HandoffOffer } from "../isolate/handoff.js";
import type { Turn } from "../isolate/hot-resources.js";
import { fanOut } from "./attempts.js";
import { currentPlaceholderMs, growPlaceholder } from "./gate-client.js";
import { abandon, checkAfterAttempt, pause, pauseLimit } from "./limits.js";
import { pollInterval, offerWindowEnd as windowEnd } from "./pacing.js";
import type { Waiter } from "./state.js";

/** An attempt that a release started for a waiter by handing it the lock over, with its token. */
export interface HandedOver {
  readonly attempt: Promise<AttemptResult>;
  readonly token: string;
}

/**
 * Until when the first in line may keep an offer standing without polling, from `now` (see
 * `pacing.offerWindowEnd`): `now` when no holder of the isolate has the lock.
 */
export function offerWindowEnd(w: Waiter, now: number): number {
  return windowEnd(now, w.hot.heldHereFor(w.hotKey, now), w.state.leaseUntil, w.state.rttMs);
}

/**
 * Sleep `ms` (see `limits.pause`); when `firstInLine`, offer meanwhile to take the lock over from
 * a release of it in this isolate; further back, listen for the release that makes us first, and
 * offer from then on. Returns the attempt such a release started for us, `free` when a release
 * found the lock free for us, or nothing.
 */
export async function pauseOrTakeOver(
  w: Waiter,
  ms: number,
  firstInLine: boolean,
): Promise<HandedOver | "free" | undefined> {
  if (!w.offersHandoff || ms <= 0) {
    // A fenced waiter takes no hand-over, but a release in this isolate that makes it first in
    // line ends its pause: its next poll, at once, takes the gate.
    if (w.o.fencing && ms > 0) await pauseUntilTurn(w, ms);
    else await pause(w, ms);
    return undefined;
  }
  const until = Math.min(w.now() + ms, pauseLimit(w));
  if (firstInLine) return pauseOffering(w, until - w.now());
  const turn = await pauseUntilTurn(w, until - w.now());
  if (turn !== "first") return turn;
  // First in line now, behind the holder the release handed the lock to (its grant may not be
  // known here yet): offer for a poll interval at least, and on while it holds the lock.
  return pauseOffering(w, Math.max(until - w.now(), pollInterval(w.state.holdMs, w.state.rttMs)));
}

/**
 * Sleep `ms` (see `limits.pause`), or until a release of our resource in this isolate learns from
 * the gate that we are first in line (see `HotResources.listenForTurn`): a waiter further back then
 * need not poll to learn that its turn is next, and the release before its turn finds its offer
 * standing. `free`: the lock is free, and ours to take now.
 */
async function pauseUntilTurn(w: Waiter, ms: number): Promise<Turn | undefined> {
  const s = w.state;
  if (s.ticket <= 0 || ms <= 0) {
    await pause(w, ms);
    return undefined;
  }
  const listening = w.hot.listenForTurn(w.hotKey, s.ticket);
  let turn: Turn | undefined;
  try {
    turn = await within(listening.turn, ms, w.signal);
  } catch (reason) {
    abandon(w, reason);
  } finally {
    listening.stop();
  }
  if (turn === undefined) await pause(w, 0);
  else s.firstInLine = true;
  return turn;
}

/** Sleep `ms` with an offer standing, and on while a holder of the isolate has the lock. */
async function pauseOffering(w: Waiter, ms: number): Promise<HandedOver | undefined> {
  if (ms <= 0) {
    await pause(w, 0);
    return undefined;
  }
  let handedOver: HandedOver | undefined;
  let taken: { outcomes: (index: number) => Promise<NodeOutcomeKind>; sentAt: number } | undefined;
  let accepted: () => void = () => {};
  const acceptance = new Promise<void>((resolve) => (accepted = resolve));
  const token = randomToken();
  // The attempt is started here, by the waiter, never inside `accept`: the release runs in the
  // holder's request, and on Workers the I/O and timers a request starts are cancelled when it
  // ends, so an attempt started there could wait forever for answers that never come. Started
  // here, its deadline is the waiter's own. Started as soon as the waiter learns of the offer's
  // take-up, with our signal: if we have given up, it aborts and undoes whatever the release set.
  const startAttempt = () => {
    if (taken === undefined || handedOver !== undefined) return;
    const { outcomes, sentAt } = taken;
    const role: GateRole = {
      index: w.gate,
      token,
      startedAt: sentAt,
      task: () => outcomes(w.gate),
      others: outcomes,
      placeholderMs: () => currentPlaceholderMs(w),
      gateTaken: () => false,
      retryHeldMs: 0,
      retryHeldEveryMs: 0,
      mayAskAgain: () => false,
    };
    const attempt = attemptAcquire(
      w.engine,
      w.request,
      w.state.attempts + 1,
      w.signal,
      w.operations,
      role,
      w.state.polls,
    );
    attempt.catch(() => undefined);
    handedOver = { attempt, token };
  };
  const offer: HandoffOffer = {
    keys: w.request.keys,
    token,
    ttlMs: w.request.ttlMs,
    waiter: w.waiterId,
    accept: (outcomes, sentAt) => {
      taken = { outcomes, sentAt };
      accepted();
    },
  };
  const hot = w.hot;
  hot.offerHandoff(w.hotKey, offer);
  try {
    // While a holder in this isolate has the lock, its release will take the offer up: keep it
    // standing (by the holder's deadline and our own limit at most) rather than poll.
    let until = w.now() + ms;
    for (;;) {
      await within(acceptance, until - w.now(), w.signal);
      const now = w.now();
      const held = Math.min(offerWindowEnd(w, now), pauseLimit(w));
      if (taken !== undefined || held <= now) break;
      until = held;
    }
  } catch (reason) {
    startAttempt();
    abandon(w, reason);
  } finally {
    hot.withdrawHandoff(w.hotKey, offer);
  }
  // A release may have taken the offer up as our timer fired.
  if (taken === undefined) await pause(w, 0);
  startAttempt();
  return handedOver;
}

/** The attempt a release made for us by handing the lock over: the lock, or nothing. */
export async function takeOver(w: Waiter, handedOver: HandedOver): Promise<Lock | undefined> {
  const result = await fanOut(w, undefined, handedOver.attempt);
  if (result.lock) return result.lock;
  checkAfterAttempt(w, result.report);
  if (result.report.nodes[w.gate]?.outcome === "acquired") {
    // The gate handed its keys over to us, and took us out of its line, as a take does.
    w.state.inLine = false;
    w.state.unreleasedTakes = 0;
    await growPlaceholder(w, result, handedOver.token);
  }
  return undefined;
}
