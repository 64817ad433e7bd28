/**
 * `edge-redlock/hono`: run a route under a distributed lock.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { withLock } from "edge-redlock/hono";
 * const app = new Hono();
 * app.post("/orders/:id/pay", withLock({ redlock, ttlMs: 10_000, resource: (c) => `order:${c.req.param("id")}` }), async (c) => {
 *   const lock = c.get("lock"); // the Lock; c.get("lockSignal") aborts before it can be lost
 *   return c.json(await pay(c.req.param("id"), { signal: c.get("lockSignal") }));
 * });
 * ```
 * @module
 */
import type { Context, Env, MiddlewareHandler } from "hono";
import {
  AcquireTimeoutError,
  ConfigurationError,
  InvalidArgumentError,
  LockHeldError,
  QuorumUnavailableError,
  ValidityExhaustedError,
} from "../errors.js";
import type { Lock } from "../lock.js";
import type { Redlock, UsingOptions } from "../redlock.js";

/** Context variables the middleware sets. */
export interface LockVariables {
  /** The lock held while the route runs. */
  lock: Lock;
  /** Aborts before the lock can be lost (reason: `LockLostError`): pass it to the protected work. */
  lockSignal: AbortSignal;
}

/** Options of {@link withLock}. Every Redlock option can be overridden here too. */
export interface WithLockOptions<E extends Env = Env> extends Omit<UsingOptions, "signal" | "waitUntil"> {
  /** The client, or a function building it from the context (e.g. from Workers bindings). */
  redlock: Redlock | ((c: Context<E>) => Redlock);
  /** The resource (or resources) to lock, derived from the request. */
  resource: (c: Context<E>) => string | readonly string[] | Promise<string | readonly string[]>;
  /** Lease of the lock, in ms; it is extended automatically while the route runs. */
  ttlMs: number;
  /**
   * `Retry-After` (seconds) on 409 and 503 answers.
   * @default 1
   */
  retryAfterSeconds?: number;
}

/**
 * A middleware that runs the rest of the chain under a lock. Answers 409 (JSON, `Retry-After`)
 * when the lock is held elsewhere, 503 when the nodes cannot form a quorum, 400 for an invalid
 * resource name, and 500 when the lock client is misconfigured. The lock is released after the
 * route, through `c.executionCtx.waitUntil` when there is one (Workers), directly otherwise.
 */
export function withLock<E extends Env = Env>(
  options: WithLockOptions<E>,
): MiddlewareHandler<E & { Variables: LockVariables }> {
  const { redlock, resource, ttlMs, retryAfterSeconds = 1, ...lockOptions } = options;
  return async (c, next) => {
    const context = c as unknown as Context<E>;
    const client = typeof redlock === "function" ? redlock(context) : redlock;
    const resources = await resource(context);
    let entered = false;
    try {
      await client.using(
        resources,
        ttlMs,
        async (signal, lock) => {
          entered = true;
          c.set("lock", lock);
          c.set("lockSignal", signal);
          await next();
        },
        { ...lockOptions, waitUntil: executionWaitUntil(c) },
      );
    } catch (error) {
      if (entered) throw error;
      const answer = lockErrorAnswer(error);
      if (!answer) throw error;
      if (answer.status !== 400 && answer.status !== 500) c.header("Retry-After", String(retryAfterSeconds));
      return c.json(answer.body, answer.status);
    }
  };
}

/** `c.executionCtx.waitUntil` when the runtime provides one (the getter throws elsewhere). */
function executionWaitUntil(c: Context): ((promise: Promise<unknown>) => void) | undefined {
  try {
    const executionCtx = c.executionCtx;
    return (promise) => executionCtx.waitUntil(promise);
  } catch {
    return undefined;
  }
}

/** The HTTP answer for an acquisition failure; node URLs are not disclosed to clients. */
function lockErrorAnswer(
  error: unknown,
): { status: 400 | 409 | 500 | 503; body: { error: string; message: string } } | undefined {
  if (error instanceof LockHeldError) {
    return { status: 409, body: { error: error.code, message: "the resource is locked by another request" } };
  }
  if (
    error instanceof QuorumUnavailableError ||
    error instanceof AcquireTimeoutError ||
    error instanceof ValidityExhaustedError
  ) {
    return { status: 503, body: { error: error.code, message: "the lock service is unavailable; try again" } };
  }
  if (error instanceof InvalidArgumentError) {
    return { status: 400, body: { error: error.code, message: error.message } };
  }
  if (error instanceof ConfigurationError) {
    return { status: 500, body: { error: error.code, message: "the lock service is misconfigured" } };
  }
  return undefined;
}
