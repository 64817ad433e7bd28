/**
 * `edge-redlock/hono`: run a route under a distributed lock.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { withLock } from "edge-redlock/hono";
 * type AppEnv = { Bindings: { REDLOCK_NODES: string } };
 * const app = new Hono<AppEnv>();
 * // The type arguments (optional) give `resource` the app's bindings and the route's params.
 * const lockOrder = withLock<AppEnv, "/orders/:id/pay">({ redlock, ttlMs: 10_000, resource: (c) => `order:${c.req.param("id")}` });
 * app.post("/orders/:id/pay", lockOrder, async (c) => {
 *   const lock = c.get("lock"); // the Lock; c.get("lockSignal") aborts before it can be lost
 *   return c.json(await pay(c.req.param("id"), { signal: c.get("lockSignal") }));
 * });
 * ```
 * @module edge-redlock/hono
 */
import type { Context, Env, Input, MiddlewareHandler } from "hono";
import type { BlankInput } from "hono/types";
import {
  AcquireTimeoutError,
  ConfigurationError,
  InvalidArgumentError,
  LockHeldError,
  QuorumUnavailableError,
  RequestBudgetError,
  ValidityExhaustedError,
} from "../base/errors.js";
import type { Lock } from "../core/lock.js";
import { checkOptionNames } from "../core/option-names.js";
import type { Redlock, UsingOptions } from "../core/redlock.js";
import { validateResources, validateTtl } from "../core/validate.js";

/** Context variables the middleware sets. */
export interface LockVariables {
  /** The lock held while the route runs. */
  lock: Lock;
  /** Aborts before the lock can be lost (reason: `LockLostError`): pass it to the protected work. */
  lockSignal: AbortSignal;
}

/**
 * Options of {@link withLock}. Every Redlock option can be overridden here too.
 *
 * `E`, `P` and `I` are the app's environment (bindings, variables), the route's path and its
 * validated input. Hono's route overloads do not pass them into a middleware factory, so give
 * them as type arguments, `withLock<AppEnv, "/orders/:id/pay">(…)`: then `c.env` has the app's
 * bindings and `c.req.param("id")` is a `string`. Without them, params are `string | undefined`
 * and a missing one is still caught at run time (500 `MISSING_ROUTE_PARAM`).
 */
export interface WithLockOptions<E extends Env = Env, P extends string = string, I extends Input = BlankInput>
  extends Omit<UsingOptions, "signal" | "waitUntil"> {
  /** The client, or a function building it from the context (e.g. from Workers bindings). */
  redlock: Redlock | ((c: Context<E, P, I>) => Redlock);
  /**
   * The resource (or resources) to lock, derived from the request. A route parameter it reads
   * that the route does not have (the middleware mounted on the wrong path) is refused with a
   * 500 `MISSING_ROUTE_PARAM` naming the parameter, instead of locking e.g. `order:undefined`.
   */
  resource: (c: Context<E, P, I>) => string | readonly string[] | Promise<string | readonly string[]>;
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
 * when the lock is held elsewhere, 503 when the nodes cannot form a quorum (or the request budget
 * or the rate limits end the attempts), 400 for an invalid resource name, and 500 when the lock
 * client or this route's options are misconfigured or the `resource` callback read a route
 * parameter the route does not have (`MISSING_ROUTE_PARAM`); a TTL or option name that cannot work
 * is refused when the app is built. The lock is released after the route, and the background work
 * of a refused acquisition finishes, through `c.executionCtx.waitUntil` when there is one
 * (Workers), directly otherwise.
 */
export function withLock<E extends Env = Env, P extends string = string, I extends Input = BlankInput>(
  options: WithLockOptions<E, P, I>,
): MiddlewareHandler<E & { Variables: LockVariables }, P, I> {
  const { redlock, resource, ttlMs, retryAfterSeconds = 1, ...lockOptions } = options;
  // The developer's mistakes fail here, when the app is built, not as a 400 that blames the
  // HTTP client: at request time an InvalidArgumentError can only be about the resource name.
  try {
    validateTtl(ttlMs);
  } catch (error) {
    throw new ConfigurationError(`withLock: ${(error as Error).message}`, { cause: error });
  }
  checkOptionNames(lockOptions, "withLock()", [], (message) => new ConfigurationError(message));
  return async (c, next) => {
    const context = c as unknown as Context<E, P, I>;
    const client = typeof redlock === "function" ? redlock(context) : redlock;
    const { context: watched, missing } = watchParams(context);
    const resources = await resource(watched);
    const pieces: readonly unknown[] = typeof resources === "string" ? [resources] : resources;
    if (missing.size > 0 || pieces.some((piece) => typeof piece !== "string")) {
      return c.json({ error: "MISSING_ROUTE_PARAM", message: missingMessage(missing, c.req.routePath) }, 500);
    }
    // A bad resource name came from the request (400); any other invalid argument past this point
    // is the route author's (an option that does not fit the client's nodes): 500.
    try {
      validateResources(resources);
    } catch (error) {
      if (!(error instanceof InvalidArgumentError)) throw error;
      return c.json({ error: error.code, message: error.message }, 400);
    }
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
      // Failed attempts leave cleanup in the background: on Workers, keep this request alive
      // for it, or it is cut off (and shows up, abandoned, in a later request's settled()).
      executionWaitUntil(c)?.(client.settled());
      const answer = lockErrorAnswer(error);
      if (!answer) throw error;
      if (answer.status !== 500) c.header("Retry-After", String(retryAfterSeconds));
      return c.json(answer.body, answer.status);
    }
  };
}

/**
 * The context as the `resource` callback sees it: the same, except that `c.req.param(name)` and
 * the object of `c.req.param()` record every parameter asked for that the route does not declare.
 * An optional parameter the route declares (`/:id?`) may be absent: the callback handles that.
 */
function watchParams<C extends Context>(c: C): { context: C; missing: Set<string> } {
  const missing = new Set<string>();
  const declared = declaredParams(c.req.routePath);
  const note = (name: string, value: unknown) => {
    if (value === undefined && !declared.has(name)) missing.add(name);
  };
  const param = (...args: unknown[]): unknown => {
    if (typeof args[0] === "string") {
      const value = c.req.param(args[0] as never) as string | undefined;
      note(args[0], value);
      return value;
    }
    const all = c.req.param() as Record<string, string | undefined>;
    return new Proxy(all, {
      get(target, key) {
        const value = Reflect.get(target, key);
        if (typeof key === "string" && !(key in Object.prototype)) note(key, value);
        return value;
      },
    });
  };
  const req = new Proxy(c.req, {
    get(target, key) {
      if (key === "param") return param;
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const context = new Proxy(c, {
    get(target, key) {
      if (key === "req") return req;
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { context, missing };
}

/** Names of the parameters a route path declares: `:id`, `:id?`, `:id{[0-9]+}`. */
function declaredParams(routePath: string): Set<string> {
  return new Set(Array.from(routePath.matchAll(/:([A-Za-z0-9_]+)/g), (match) => match[1] as string));
}

function missingMessage(missing: ReadonlySet<string>, routePath: string): string {
  if (missing.size === 0) return "withLock: the resource callback returned a resource that is not a string";
  const names = [...missing].map((name) => `"${name}"`).join(", ");
  return `withLock: route parameter ${names} is missing on ${routePath}; mount the middleware on a path that declares it`;
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
): { status: 409 | 500 | 503; body: { error: string; message: string } } | undefined {
  if (error instanceof LockHeldError) {
    return { status: 409, body: { error: error.code, message: "the resource is locked by another request" } };
  }
  if (
    error instanceof QuorumUnavailableError ||
    error instanceof AcquireTimeoutError ||
    error instanceof ValidityExhaustedError ||
    error instanceof RequestBudgetError
  ) {
    return { status: 503, body: { error: error.code, message: "the lock service is unavailable; try again" } };
  }
  if (error instanceof InvalidArgumentError) {
    return { status: 500, body: { error: error.code, message: "the lock is misconfigured in this route" } };
  }
  if (error instanceof ConfigurationError) {
    return { status: 500, body: { error: error.code, message: "the lock service is misconfigured" } };
  }
  return undefined;
}
