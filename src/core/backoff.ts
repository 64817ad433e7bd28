/**
 * Delay between acquire attempts: full-jitter capped exponential backoff. Full jitter spreads
 * contending clients out best, so they stop colliding in lockstep. Also the arithmetic the lines of
 * `waiting/` and of the semaphore share: how long the retry settings are patient, and how polls are
 * spaced when the request budget would not last the wait.
 * @module
 */
import { MAX_DELAY_MS } from "./options.js";

/**
 * The delay after failed attempt `attempt` (1-based): uniform in `[0, min(maxMs, baseMs * 2^(attempt-1))]`.
 * @param random a uniform number in [0, 1), e.g. `Math.random()`.
 */
export function fullJitterDelay(attempt: number, baseMs: number, maxMs: number, random: number): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(attempt - 1, 52));
  return Math.floor(random * (ceiling + 1));
}

/**
 * How long the retry settings wait between `maxAttempts` attempts: the sum of the backoff's
 * ceilings, `min(retryMaxDelayMs, retryBaseDelayMs * 2^(k-1))` for k < maxAttempts (11.1 s by
 * default), at most `MAX_DELAY_MS`. A waiter in line is this patient without the line moving.
 */
export function patience(maxAttempts: number, retryBaseDelayMs: number, retryMaxDelayMs: number): number {
  let total = 0;
  for (let k = 1; k < Math.min(maxAttempts, 64); k++) {
    total += Math.min(retryMaxDelayMs, retryBaseDelayMs * 2 ** (k - 1));
  }
  return Math.min(total, MAX_DELAY_MS);
}

/**
 * The gap from a waiter's last poll to its next, in ms, that spaces the polls a request budget
 * still allows (`pollsLeft`) in a geometric progression from the time waited so far (`waitedMs`,
 * at least `seedMs`) to the end of the waiting (`waitLeftMs` more), so that a turn that comes soon is
 * seen soon and a waiter behind a long hold runs out of patience, not of requests. 0 when nothing
 * asks for spacing (requests to spare, or no end to the waiting to spread them over); the rest of
 * the waiting when no poll is left.
 */
export function geometricGap(waitedMs: number, waitLeftMs: number, pollsLeft: number, seedMs: number): number {
  if (pollsLeft === Number.POSITIVE_INFINITY || !(waitLeftMs > 0) || !Number.isFinite(waitLeftMs)) return 0;
  if (pollsLeft < 1) return waitLeftMs;
  const from = Math.max(waitedMs, seedMs);
  return from * (((from + waitLeftMs) / from) ** (1 / pollsLeft) - 1);
}

/**
 * How long from `now` until one more poll keeps every window of a second at `perSecond` polls or
 * fewer, given when the latest polls were sent (`recentPolls`, oldest first).
 */
export function windowGap(recentPolls: readonly number[], now: number, perSecond: number): number {
  const oldest = recentPolls[recentPolls.length - perSecond];
  return oldest === undefined ? 0 : Math.max(0, oldest + 1000 - now);
}

/**
 * The least delay before the next attempt of a wait by backoff, when the request budget allows
 * fewer attempts (`affordable`) than the retry schedule has left (`scheduled`): the geometric gap
 * (see {@link geometricGap}) that spends the last of them at the schedule's end (`waitLeftMs` from
 * now, `waitedMs` waited so far, from `seedMs`), times `0.5 + random` so that callers that started
 * together do not retry together, at most `maxMs`. 0 when the budget allows the schedule.
 */
export function budgetSpread(
  affordable: number,
  scheduled: number,
  waitedMs: number,
  waitLeftMs: number,
  seedMs: number,
  maxMs: number,
  random: number,
): number {
  if (affordable >= scheduled) return 0;
  return Math.min(maxMs, geometricGap(waitedMs, waitLeftMs, affordable, seedMs) * (0.5 + random));
}
