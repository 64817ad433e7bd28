/**
 * Fake time for the unit tests: the timers are faked around each test, and `run` advances them
 * until a promise settles.
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

/** Let the fake timers run, `stepMs` at a time, until `promise` settles. */
export async function run<T>(promise: Promise<T>, stepMs = 10, maxMs = 120_000): Promise<T> {
  let done = false;
  const tracked = promise.finally(() => {
    done = true;
  });
  tracked.catch(() => {});
  for (let t = 0; !done && t < maxMs; t += stepMs) await vi.advanceTimersByTimeAsync(stepMs);
  return tracked;
}
