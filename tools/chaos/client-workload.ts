/**
 * The random workload of one worker (see `client-worker.ts`): acquire a resource (or several),
 * read a counter, work, maybe extend, write, release; and, when the scenario asks for it, the API
 * misused as users misuse it (see `Misuse` in protocol.ts): `release()` called again, the release
 * made inside `using()`, extensions left in flight at the release, and released tokens handed to
 * other client instances, which release or extend by token with them.
 *
 * A misuse draws from the worker's seeded generator only when the scenario enables it, so the
 * scenarios without misuse draw the same workload as before.
 * @module
 */
import { sleep } from "./client-support.js";
import type { ReleaseMisuse, Worker } from "./client-worker.js";
import { harnessNow } from "./clock.js";
import type { StaleToken, Target } from "./protocol.js";
import type { Rng } from "./rng.js";

/** Runs the workload until the harness clock passes `untilMs` or the worker is stopped. */
export async function runWorkload(w: Worker, untilMs: number): Promise<void> {
  const { ttlMs, misuse = {} } = w.config;
  while (!w.stopping && harnessNow() < untilMs) {
    const target = w.nextTarget();
    if (chance(w.rng, misuse.releaseInUsing)) await usingRound(w, target, ttlMs);
    else await plainRound(w, target, ttlMs);
    await sleep(w.rng.int(0, w.config.thinkMs));
  }
}

function chance(rng: Rng, p: number | undefined): boolean {
  return p !== undefined && p > 0 && rng.next() < p;
}

/** How the next release misuses the API (nothing without misuse). */
function releaseMisuse(w: Worker): ReleaseMisuse {
  const misuse = w.config.misuse ?? {};
  const repeat = chance(w.rng, misuse.repeatRelease) ? (w.rng.next() < 0.5 ? 1 : 2) : 0;
  return {
    repeat,
    together: repeat > 0 && w.rng.next() < 0.5,
    shareToken: chance(w.rng, misuse.staleToken),
  };
}

async function plainRound(w: Worker, target: Target, ttlMs: number): Promise<void> {
  const lock = await w.acquire(target, ttlMs, false);
  if (!lock) return;
  const read = await w.read();
  if (w.config.workMs > 0) await sleep(w.rng.int(0, w.config.workMs));
  const inFlight = chance(w.rng, w.config.misuse?.extendInFlight);
  // Extensions never shorten the lease (as `using()` extends: the full TTL, before expiry).
  // A shortening extension that fails is an open finding with its own scenario
  // (lost-extension); here it would only make the safe runs fail at random.
  if (!inFlight && w.rng.next() < w.config.extendProbability) await w.extend(w.rng.int(ttlMs, 2 * ttlMs));
  await w.write(read);
  if (inFlight) {
    // Shorter or longer than the TTL the keys have now; the release follows within a few ms.
    const shorter = w.rng.next() < 0.5;
    const ttl = shorter
      ? w.rng.int(Math.ceil(ttlMs / 10), Math.floor(ttlMs / 2))
      : w.rng.int(Math.ceil(1.5 * ttlMs), 2 * ttlMs);
    w.extendInFlight(ttl);
    await sleep(w.rng.int(0, 5));
  }
  await w.release(releaseMisuse(w));
}

/**
 * The round in `redlock.using()`. Most of the time the routine releases the lock itself (and maybe
 * again, see {@link releaseMisuse}), and `using()` then releases it once more in its `finally`;
 * otherwise the claim ends as the routine returns and `using()`'s release is the release.
 */
async function usingRound(w: Worker, target: Target, ttlMs: number): Promise<void> {
  const invokedAt = w.invokeAcquire(target, ttlMs, "using");
  let granted = false;
  let finish: () => void = () => {};
  const finished = new Promise<undefined>((resolve) => {
    finish = () => resolve(undefined);
  });
  let releasing: Promise<boolean> | undefined;
  try {
    await w.redlock.using(target, ttlMs, async (_signal, lock) => {
      granted = true;
      await w.granted(lock, invokedAt, ttlMs);
      const read = await w.read();
      if (w.config.workMs > 0) await sleep(w.rng.int(0, w.config.workMs));
      await w.write(read);
      if (w.rng.next() < 0.75) await w.release(releaseMisuse(w));
      else releasing = w.release({ by: () => finished });
    });
  } catch (error) {
    if (!granted) w.failAcquire(target, error);
    else w.emit({ t: harnessNow(), type: "info", f: "note", data: { text: "using() threw after the grant" } });
  } finally {
    finish();
    await releasing;
  }
}

/**
 * A token another worker released, misused by this one a moment later: released or extended by
 * token, with a TTL of 1–5 % of the workload's (the kind of extension that cuts a holder's keys).
 */
export function misuseStaleToken(w: Worker, rng: Rng, stale: StaleToken): void {
  const f = rng.next() < 0.6 ? "release" : "extend";
  const ttlMs = rng.int(Math.ceil(w.config.ttlMs / 100), Math.floor(w.config.ttlMs / 20));
  const delayMs = rng.int(0, 20);
  w.misuseLater(async () => {
    await sleep(delayMs);
    await w.byToken(f, stale, ttlMs);
  });
}
