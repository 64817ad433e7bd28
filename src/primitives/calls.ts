/**
 * What the semaphore and the read-write lock share: their keys in the reserved namespace, the
 * checking of a call's options (as `Redlock` checks them), and the operations of the locks they
 * hand out.
 * @module
 */
import { InvalidArgumentError } from "../base/errors.js";
import type { Engine } from "../core/engine.js";
import type { RequestMeter } from "../core/fanout.js";
import { RESERVED_KEY_PART } from "../core/keys.js";
import type { Lock, LockOperations } from "../core/lock.js";
import { heldByCaller, runHolding } from "../core/nesting.js";
import type { verifyOnNode } from "../core/node-operations.js";
import type { NodeRelease } from "../core/operations/cleanup.js";
import { extendLock, type NodeExtend } from "../core/operations/extend.js";
import { releaseLock } from "../core/operations/release.js";
import { verifyLock } from "../core/operations/verify.js";
import { callInput, callOptions } from "../core/option-names.js";
import { MAX_RESOURCE_LENGTH, type ResolvedOptions } from "../core/options.js";
import type { Redlock, UsingOptions } from "../core/redlock.js";
import { runUnderLock } from "../core/using.js";
import type { ClientWaiting } from "../core/waiting.js";

/**
 * The keys of one primitive named `name`, under `keyPrefix + RESERVED_KEY_PART + kind + ":"`: no
 * lock key reaches them (a resource in the reserved namespace is refused), and the name's length
 * goes first, so no other kind or name shares a key (`a:1` with slot 2 and `a` with slot `1:2`
 * differ in their lengths).
 */
export function primitiveKey(keyPrefix: string, kind: "semaphore" | "rw", name: string, part: string): string {
  return `${keyPrefix}${RESERVED_KEY_PART}${kind}:${name.length}:${name}:${part}`;
}

/** A primitive's name: a non-empty string of at most {@link MAX_RESOURCE_LENGTH} characters. */
export function validateName(name: unknown, where: string): string {
  if (typeof name !== "string" || name.length === 0 || name.length > MAX_RESOURCE_LENGTH) {
    throw new InvalidArgumentError(
      `the name of ${where} must be a non-empty string of at most ${MAX_RESOURCE_LENGTH} characters`,
    );
  }
  return name;
}

/** A client to build on: a `Redlock` of `edge-redlock` or `edge-redlock/core`. */
export function validateClient(redlock: unknown, where: string): Redlock {
  const engine = (redlock as { engine?: unknown } | null)?.engine;
  if (typeof redlock !== "object" || redlock === null || typeof engine !== "object" || engine === null) {
    throw new InvalidArgumentError(`${where} needs a Redlock client as its first argument`);
  }
  return redlock as Redlock;
}

/** One acquire call, checked: its resolved options, signal, `waitUntil` and request meter. */
export interface Call {
  readonly ttlMs: number;
  readonly o: ResolvedOptions;
  readonly signal: AbortSignal | undefined;
  readonly waitUntil: UsingOptions["waitUntil"];
  readonly meter: RequestMeter;
}

/**
 * Check an acquire call's TTL and options as `Redlock.acquire()` does (`using`: as `using()` does,
 * `waitUntil` allowed); nothing is sent.
 */
export function prepareCall(
  engine: Engine,
  ttlMs: number,
  options: UsingOptions | undefined,
  where: string,
  using = false,
): Call {
  const { signal, waitUntil, overrides } = callInput(options, where, using ? ["waitUntil"] : []);
  const o = engine.resolveWithTtl(overrides, ttlMs);
  return { ttlMs, o, signal, waitUntil, meter: { sent: 0, returned: false } };
}

/**
 * Run `routine` under `lock` as `Redlock.using()` does: auto-extension, release in `finally`, and
 * the primitive named by `held` (its {@link primitiveKey} without a part) marked as held by the
 * routine's async context, for {@link refuseNested}.
 */
export function runUsing<T>(
  redlock: Redlock,
  call: Call,
  held: string,
  lock: Lock,
  routine: (signal: AbortSignal, lock: Lock) => Promise<T>,
): Promise<T> {
  const { waitUntil } = call;
  const keepAlive = waitUntil && ((releasing: Promise<unknown>) => waitUntil(releasing.then(() => redlock.settled())));
  return runHolding(redlock.engine.scoped([held]), () => runUnderLock(lock, routine, call.signal, keepAlive));
}

/**
 * Inside a `using()` routine that holds a permit or a read or write lock of this primitive, an
 * acquisition of it that waits could wait for itself: a write lock for the routine's own lock, a
 * reader behind a writer that waits for the routine's read lock, a permit behind permits held by
 * routines that each wait for another. Refused at once, as a mutex's nested `acquire()` is, where
 * the runtime can tell (see `core/nesting.ts`); a try does not wait and is let through.
 * @throws {InvalidArgumentError}
 */
export function refuseNested(engine: Engine, held: string, where: string): void {
  if (heldByCaller(engine.scoped([held])) === undefined) return;
  throw new InvalidArgumentError(
    `${where} inside a using() routine that holds this lock would wait for itself: use the routine's lock, or a tryAcquire`,
  );
}

/** Releases of a primitive's locks are plain compare-and-`DEL`s: no gate takes part. */
const plainRelease: ClientWaiting = {
  acquire: () => Promise.reject(new Error("not used: a primitive waits by itself")),
};

/**
 * The operations of a primitive's locks, on its own per-node scripts (the plain lock's when none
 * are given). `released` is told of every release.
 */
export function lockOperations(
  engine: Engine,
  released: (lock: Lock) => void,
  scripts: { extend?: NodeExtend; release?: NodeRelease; verify?: typeof verifyOnNode } = {},
): LockOperations {
  return {
    extend: (lock, ttlMs, overrides) =>
      extendLock(engine, lock, ttlMs, callOptions(overrides, "lock.extend()"), scripts.extend),
    release: (lock) => {
      released(lock);
      return releaseLock(engine, plainRelease, lock, scripts.release);
    },
    verify: (lock, overrides) => verifyLock(engine, lock, callOptions(overrides, "lock.verify()"), scripts.verify),
  };
}
