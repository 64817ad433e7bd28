/**
 * `edge-redlock/otel`: OpenTelemetry metrics and spans for every lock operation of a client, from
 * the `Meter` and `Tracer` you pass (`@opentelemetry/api`, an optional peer dependency: this module
 * imports its types only, and a bundle that never imports this module carries none of it). See
 * docs/observability.md for the metrics table and what each span holds.
 *
 * @example
 * ```ts
 * import { metrics, trace } from "@opentelemetry/api";
 * import { Redlock } from "edge-redlock";
 * import { instrument } from "edge-redlock/otel";
 *
 * const redlock = instrument(new Redlock({ nodes }), {
 *   meter: metrics.getMeter("edge-redlock"),
 *   tracer: trace.getTracer("edge-redlock"),
 *   resourceAttribute: ([resource]) => resource?.split(":")[0], // "invoice:42" → "invoice"
 * });
 * ```
 * @module edge-redlock/otel
 */
import type { Attributes, Meter, Tracer } from "@opentelemetry/api";
import { isRedlockError } from "../base/errors.js";
import type { Lock } from "../core/lock.js";
import type { RedlockOptions, ResolvedOptions } from "../core/options.js";
import type { Redlock } from "../core/redlock.js";
import { type CallHooks, CallTelemetry, type Telemetry } from "./call.js";
import { ATTRIBUTE, createInstruments } from "./telemetry.js";

export { ATTRIBUTE, METRIC } from "./telemetry.js";

/** Options of {@link instrument}. */
export interface InstrumentOptions {
  /**
   * Where the metrics go, e.g. `metrics.getMeter("edge-redlock")`.
   * @default undefined (no metrics)
   */
  meter?: Meter | undefined;
  /**
   * Where the spans go, e.g. `trace.getTracer("edge-redlock")`.
   * @default undefined (no spans)
   */
  tracer?: Tracer | undefined;
  /**
   * Resource names are not attributes (each name would be a time series of its own). This maps a
   * lock's resources (sorted) to a value of few distinct values, e.g. its kind (`"invoice"` for
   * `"invoice:42"`), set as `edge_redlock.resource` on every metric and span of the lock;
   * `undefined` for none. A mapping that throws is treated as `undefined`.
   * @default undefined (no resource attribute)
   */
  resourceAttribute?: ((resources: readonly string[]) => string | undefined) | undefined;
}

/** The hooks a call's instrumentation adds to. */
const HOOKS = ["onAttempt", "onPoll", "onLockLost"] as const satisfies readonly (keyof CallHooks)[];

/**
 * Instrument a client: every acquisition (`acquire`, `tryAcquire`, `using`) made from now on, and
 * the extensions, verifications, release and loss of every lock it grants, are measured, and
 * `extend` and `release` by token too. The client's own hooks, and the hooks a call is given, still
 * run: the instrumentation's run beside them. The client itself is returned (instrumented in
 * place: its `acquire`, `tryAcquire`, `using`, `extend` and `release` are wrapped). Call it once
 * per client (each call adds its own instrumentation).
 *
 * Hooks given to one `lock.extend()` or `lock.verify()` call replace the lock's own for that call,
 * the instrumentation's included. Every lock gets an `onLockLost` hook, hence a loss timer.
 */
export function instrument<R extends Redlock>(redlock: R, options: InstrumentOptions = {}): R {
  const { meter, tracer, resourceAttribute } = options;
  const telemetry: Telemetry = {
    instruments: meter === undefined ? undefined : createInstruments(meter),
    tracer,
    nodeCount: redlock.nodes.length,
  };
  // The client's own options (validated when it was made): its hooks, and its clock.
  const base: ResolvedOptions = redlock.engine.resolve(undefined, 10_000);
  const attributesOf = (resources: unknown): Attributes => {
    if (resourceAttribute === undefined) return {};
    const list = typeof resources === "string" ? [resources] : Array.isArray(resources) ? [...resources].sort() : [];
    try {
      const value = resourceAttribute(list);
      return typeof value === "string" ? { [ATTRIBUTE.resource]: value } : {};
    } catch {
      return {};
    }
  };
  /** A call's telemetry and the options to hand the core: the call's own, with the call's hooks beside theirs. */
  const track = <O extends RedlockOptions>(resources: unknown, given: O | undefined, ttlMs?: unknown) => {
    const call = new CallTelemetry(
      telemetry,
      given?.clock ?? base.clock,
      attributesOf(resources),
      ttlMs === undefined ? undefined : { ttlMs },
    );
    // Anything but an object is passed on untouched, for the core to refuse.
    if (given !== undefined && (typeof given !== "object" || given === null)) return { call, options: given };
    const options: Record<string, unknown> = { ...given };
    for (const name of HOOKS) {
      const theirs = (given?.[name] ?? base[name]) as ((event: unknown) => void) | undefined;
      const ours = call.hooks[name] as (event: unknown) => void;
      options[name] = (event: unknown) => {
        try {
          ours(event);
        } catch {
          // Telemetry must never break locking, nor keep the user's hook from running.
        }
        theirs?.(event);
      };
    }
    return { call, options: options as unknown as O };
  };
  const outcomeOf = (error: unknown) => (isRedlockError(error) ? error.code : "_OTHER");

  const { acquire, tryAcquire, using, extend, release } = redlock;
  redlock.acquire = async (resources, ttlMs, given) => {
    const { call, options } = track(resources, given, ttlMs);
    try {
      const lock = await acquire.call(redlock, resources, ttlMs, options);
      call.granted();
      return lock;
    } catch (error) {
      call.failed(outcomeOf(error));
      throw error;
    }
  };
  redlock.tryAcquire = async (resources, ttlMs, given) => {
    const { call, options } = track(resources, given, ttlMs);
    try {
      const lock = await tryAcquire.call(redlock, resources, ttlMs, options);
      if (lock === null) call.failed("LOCK_HELD");
      else call.granted();
      return lock;
    } catch (error) {
      call.failed(outcomeOf(error));
      throw error;
    }
  };
  redlock.using = async <T>(
    resources: string | readonly string[],
    ttlMs: number,
    routine: (signal: AbortSignal, lock: Lock) => Promise<T>,
    given?: Parameters<Redlock["using"]>[3],
  ): Promise<T> => {
    const { call, options } = track(resources, given, ttlMs);
    let granted = false;
    const measured =
      typeof routine === "function"
        ? (signal: AbortSignal, lock: Lock) => {
            granted = true;
            call.granted();
            return routine(signal, lock);
          }
        : routine;
    try {
      return (await using.call(redlock, resources, ttlMs, measured, options)) as T;
    } catch (error) {
      // After the grant, an error is the routine's or its lock's, not the acquisition's.
      if (!granted) call.failed(outcomeOf(error));
      throw error;
    }
  };
  redlock.extend = (resources, token, ttlMs, given) =>
    extend.call(redlock, resources, token, ttlMs, track(resources, given).options);
  redlock.release = (resources, token, given) =>
    release.call(redlock, resources, token, track(resources, given).options);
  return redlock;
}
