/**
 * Fake time for the unit tests: the timers are faked around each test, and the helpers below move
 * them on until what a test waits for has happened (the one place such a loop is written).
 */
import { afterEach, beforeEach, vi } from "vitest";

/** Fake the timers (and Date.now()) around every test of the calling file. */
export function useFakeTime(now = 1_000_000): void {
  beforeEach(() => {
    vi.useFakeTimers({ now });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
}

/** How fake time moves on until `done()`: {@link inSteps} or {@link timerByTimer}. */
export type Advance = (done: () => boolean) => Promise<void>;

/** `stepMs` of fake time at a time, `maxMs` in all at most. */
export function inSteps(stepMs = 5, maxMs = 60_000): Advance {
  return async (done) => {
    for (let t = 0; !done() && t < maxMs; t += stepMs) await vi.advanceTimersByTimeAsync(stepMs);
  };
}

/** To the next timer at once, `maxTimers` timers at most: for simulations whose delays vary widely. */
export function timerByTimer(maxTimers = 100_000): Advance {
  return async (done) => {
    for (let i = 0; !done() && i < maxTimers; i++) await vi.advanceTimersToNextTimerAsync();
  };
}

/** Move fake time on until `done()`, or as far as `advance` goes: whether `done()` then. */
export async function advanceUntil(done: () => boolean, advance: Advance = inSteps()): Promise<boolean> {
  await advance(done);
  return done();
}

/** Move fake time on until `promise` settles (as far as `advance` goes at most), then its outcome. */
export async function settle<T>(promise: Promise<T>, advance: Advance): Promise<T> {
  let done = false;
  const tracked = promise.finally(() => {
    done = true;
  });
  tracked.catch(() => {});
  await advance(() => done);
  return tracked;
}

/** Let the fake timers run, `stepMs` at a time, until `promise` settles. */
export function run<T>(promise: Promise<T>, stepMs = 10, maxMs = 120_000): Promise<T> {
  return settle(promise, inSteps(stepMs, maxMs));
}

/** Whether `work` resolves (not rejects) as fake time moves on: 5 ms steps, for at most `limitMs`. */
export async function resolvesOnFakeTime(work: Promise<unknown>, limitMs: number): Promise<boolean> {
  let resolved = false;
  void work.then(() => {
    resolved = true;
  });
  return advanceUntil(() => resolved, inSteps(5, limitMs));
}
