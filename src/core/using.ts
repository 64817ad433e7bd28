/**
 * `using()`: run a routine under a lock, extend it automatically before expiry, always release.
 * @module
 */

import { ExtendError, QuorumUnavailableError } from "../base/errors.js";
import { anySignal, sleep } from "../base/signals.js";
import { callHook } from "./engine.js";
import type { Lock } from "./lock.js";
import { isFailure } from "./quorum.js";

/** Run `routine` under `lock` (already acquired), then release it. The routine's error wins. */
export async function runUnderLock<T>(
  lock: Lock,
  routine: (signal: AbortSignal, lock: Lock) => Promise<T>,
  callerSignal: AbortSignal | undefined,
  waitUntil: ((promise: Promise<unknown>) => void) | undefined,
): Promise<T> {
  const stop = new AbortController();
  const extending = autoExtend(lock, stop.signal);
  const signal = callerSignal ? anySignal([lock.signal, callerSignal]) : lock.signal;
  try {
    const result = await routine(signal, lock);
    // A routine that ignored the signal and outlived its lock must not resolve as if it held the
    // lock throughout: the loss (or expiry) is the call's outcome. A release of its own is not.
    if (!lock.released) lock.assertHeld(0);
    return result;
  } finally {
    stop.abort();
    const releasing = releaseAfter(extending, lock);
    if (waitUntil) waitUntil(releasing);
    else await releasing;
  }
}

/** Release once auto-extension has stopped; a release without quorum goes to `onReleaseError`. Never rejects. */
async function releaseAfter(extending: Promise<void>, lock: Lock): Promise<void> {
  await extending;
  const result = await lock.release();
  if (result.released < lock.options.quorum && result.nodes.some((n) => isFailure(n.outcome))) {
    callHook(lock.options.onReleaseError, {
      resources: lock.resources,
      error: new QuorumUnavailableError(
        `could not release ${lock.resources.join(", ")} on a quorum; it expires by its TTL`,
        [result.report],
      ),
    });
  }
}

/**
 * Extend whenever the remaining validity falls to `autoExtendThreshold` of the TTL, with the
 * lock's own options (its `maxExtensions` and `maxHoldMs` end the extensions, and the lock's
 * signal then aborts before the lock can be lost).
 */
async function autoExtend(lock: Lock, stop: AbortSignal): Promise<void> {
  const o = lock.options;
  const ttlMs = lock.ttlMs;
  const stopped = anySignal([stop, lock.signal]);
  let retryDelay = 0;
  while (!stopped.aborted) {
    const wait = retryDelay || lock.remainingMs() - ttlMs * o.autoExtendThreshold;
    try {
      if (wait > 0) await sleep(wait, stopped);
    } catch {
      return;
    }
    // The last extension fits what maxHoldMs leaves rather than being refused for overshooting it.
    const leftMs = o.maxHoldMs === undefined ? ttlMs : Math.floor(lock.startedAt + o.maxHoldMs - o.clock.now()) - 1;
    if (leftMs <= o.minValidityMs) return;
    try {
      await lock.extend(Math.min(ttlMs, leftMs));
      retryDelay = 0;
    } catch (error) {
      // Limits, expiry and a lost lock are final: the lock's signal reports them. A failed
      // quorum may be transient: try again soon while validity is left.
      if (!(error instanceof ExtendError) || lock.signal.aborted) return;
      retryDelay = Math.max(10, Math.min(o.retryBaseDelayMs, (lock.remainingMs() - o.minValidityMs) / 4));
    }
  }
}
