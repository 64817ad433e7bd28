/**
 * Small AbortSignal and timer helpers on Web APIs only.
 * @module
 */

/** Wait `ms` milliseconds. Rejects with the signal's reason if it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * `promise`'s value, or `undefined` once `ms` have passed, whichever comes first; rejects with the
 * signal's reason if it aborts first. The timer is the caller's own: on Workers a promise made by
 * another request never settles once that request has ended (its I/O and timers are cancelled with
 * it), so waiting for one needs a bound that does not depend on it.
 */
export function within<T>(promise: Promise<T>, ms: number, signal?: AbortSignal): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const finish = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const onAbort = () => {
      finish();
      reject(signal?.reason);
    };
    const timer = setTimeout(
      () => {
        finish();
        resolve(undefined);
      },
      Math.max(0, ms),
    );
    signal?.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        finish();
        resolve(value);
      },
      (error: unknown) => {
        finish();
        reject(error);
      },
    );
  });
}

/** A signal that aborts when any of `signals` aborts, with that signal's reason. */
export function anySignal(signals: readonly AbortSignal[]): AbortSignal {
  if (typeof AbortSignal.any === "function") return AbortSignal.any([...signals]);
  const controller = new AbortController();
  for (const signal of signals) {
    if (signal.aborted) {
      controller.abort(signal.reason);
      break;
    }
    signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  }
  return controller.signal;
}

/**
 * `setTimeout` that does not keep a Node or Bun process alive (where timers have `unref`).
 * Elsewhere it is a plain `setTimeout`.
 */
export function backgroundTimeout(callback: () => void, ms: number): ReturnType<typeof setTimeout> {
  const timer = setTimeout(callback, Math.max(0, ms));
  (timer as { unref?: () => void }).unref?.();
  return timer;
}
