/**
 * Options: one object with frozen defaults, overridable per call, validated before anything is sent.
 * @module
 */
import type { Clock } from "../base/clock.js";
import { monotonicClock } from "../base/clock.js";
import type { RedlockError } from "../base/errors.js";
import { InvalidArgumentError } from "../base/errors.js";
import type { AttemptReport, NodeOutcome, Operation } from "../base/report.js";
import type { RequestMeter } from "./fanout.js";

/** What a custom retry policy is told about the attempt that just failed. */
export interface RetryContext {
  /** 1-based number of the attempt that failed. */
  readonly attempt: number;
  /** That attempt's report. */
  readonly report: AttemptReport;
}

/** Lifecycle hooks. They run synchronously; an exception thrown by a hook is swallowed. */
export interface RedlockHooks {
  /** After every acquire, extend or release attempt has been decided. */
  onAttempt?: (report: AttemptReport) => void;
  /** For every node answer that is an error or a timeout, including late ones. */
  onNodeError?: (event: { operation: Operation; resources: readonly string[]; outcome: NodeOutcome }) => void;
  /** Once per lock, when its signal aborts because the lock can no longer be trusted. */
  onLockLost?: (event: { resources: readonly string[]; error: RedlockError }) => void;
  /** When `using()` could not release on a quorum after the routine finished (the lock then expires by its TTL). */
  onReleaseError?: (event: { resources: readonly string[]; error: RedlockError }) => void;
  /** After every poll of the gate while waiting in line: `acquired` (took it), `held` (in line at `rank`, 0 first) or the failure. */
  onPoll?: (event: { resources: readonly string[]; outcome: NodeOutcome; rank?: number | undefined }) => void;
}

/** Options of a {@link Redlock} client. Every one can be overridden per call. */
export interface RedlockOptions extends RedlockHooks {
  /**
   * Nodes that must agree. Raise it to tolerate nodes that forget keys (restarts without
   * persistence): `floor((N + f) / 2) + 1` tolerates `f` of them. Never below a majority.
   * @default floor(N / 2) + 1
   */
  quorum?: number;
  /**
   * Clock drift allowance as a fraction of the TTL; validity is `ttl - elapsed - (floor(ttl * driftFactor) + 2)`.
   * @default 0.01
   */
  driftFactor?: number;
  /**
   * Deadline of every single request to a node, in milliseconds. A dead or slow node costs at
   * most this long. Keep it small against the TTL.
   * @default min(1000, max(50, floor(ttl / 10)))
   */
  requestTimeoutMs?: number;
  /**
   * Least validity a lock must have left to count as held, in milliseconds. Acquire and extend
   * fail below it, and `lock.signal` aborts when the remaining validity falls under it.
   * @default floor(ttl / 10)
   */
  minValidityMs?: number;
  /**
   * Attempts `acquire()` makes before giving up (`tryAcquire()` always makes one). An attempt is
   * one fan-out to every node; polls of a held lock while waiting are not attempts.
   * @default 10, or `Infinity` when `acquireTimeoutMs` is given (then time bounds the attempts)
   */
  maxAttempts?: number;
  /**
   * Overall deadline for `acquire()`, in milliseconds: no new attempt starts after it. When it is
   * given and `maxAttempts` is not, it alone bounds the attempts.
   * @default undefined (bounded by `maxAttempts` only)
   */
  acquireTimeoutMs?: number | undefined;
  /**
   * First retry delay cap for the default full-jitter backoff: the delay after attempt `n` is
   * uniform in `[0, min(retryMaxDelayMs, retryBaseDelayMs * 2^(n-1))]`.
   * @default 100
   */
  retryBaseDelayMs?: number;
  /**
   * Largest delay between attempts of the default backoff, in milliseconds.
   * @default 2000
   */
  retryMaxDelayMs?: number;
  /**
   * A custom retry policy: the delay in ms before the next attempt, or `null` to stop.
   * Replaces the default backoff.
   * @default undefined (full-jitter capped exponential backoff)
   */
  retryDelay?: ((context: RetryContext) => number | null) | undefined;
  /**
   * How many times one lock may be extended (liveness: a stuck holder cannot keep it forever).
   * @default 100
   */
  maxExtensions?: number;
  /**
   * Longest a lock may be held in total through extensions, in milliseconds.
   * @default undefined (no limit besides `maxExtensions`)
   */
  maxHoldMs?: number | undefined;
  /**
   * Requests one `acquire()`, `tryAcquire()` or `using()` call may send until it returns, whatever
   * for (fan-outs, polls of the gate, script fallbacks, the cluster check, leaving the gate's line,
   * the cleanup of a failed attempt sent meanwhile), with the release of its lock (one request per
   * node) kept in reserve: a call that would need more gives up with a `RequestBudgetError` rather
   * than send them, and waiting in line spaces its polls to last within it. The default keeps an
   * acquisition and its release within the 50 subrequests a Cloudflare Workers Free invocation
   * may make, with 10 left for the request's own work and for what runs once the call has
   * returned (the slow nodes of a release, the cleanup of its last failed attempt, which
   * `settled()` covers). `Infinity` for no budget.
   * @default 40
   */
  requestBudget?: number;
  /**
   * `using()` extends the lock when the remaining validity falls to this fraction of the TTL.
   * @default 0.5
   */
  autoExtendThreshold?: number;
  /**
   * Prefix of every Redis key: the key of resource `r` is `keyPrefix + r`.
   * @default ""
   */
  keyPrefix?: string;
  /**
   * Monotonic time source.
   * @default performance.now()
   */
  clock?: Clock;
  /**
   * Give every lock a fencing token (`lock.fence`): unique per grant and increasing in real-time
   * order across grants of the same resources, for a protected store to reject stale writers.
   * Pass the `fencing` value of `edge-redlock/fencing` (`import { fencing } from
   * "edge-redlock/fencing"`): a bundle that never imports it carries none of its code. Costs a
   * second round trip per acquisition (see docs/fencing.md). Needs a one-time
   * `initializeFencing(redlock)` per deployment; nodes found without their marker are quarantined
   * for `quarantineMs` and repaired from a quorum.
   * @default false
   */
  fencing?: Fencing | false;
  /**
   * How many nodes may silently lose recent writes (a failover under asynchronous replication, a
   * restore from an older snapshot) without breaking mutual exclusion or fencing: the quorum
   * becomes `floor((N + f) / 2) + 1` (with an explicit `quorum`, the larger of the two).
   * @default 0
   */
  faultTolerance?: number;
  /**
   * With `fencing`: how long a node found without its marker (restarted empty) refuses to grant,
   * in milliseconds. Must cover the longest TTL in use plus its drift allowance; fenced locks and
   * extensions with a longer TTL are refused.
   * @default 60000
   */
  quarantineMs?: number;
}

/**
 * The longest delay or timeout accepted, in milliseconds: 2^31 - 1, the largest value timers
 * honour everywhere (a larger one fires after 1 ms instead: a hot loop).
 */
export const MAX_DELAY_MS = 2_147_483_647;

/** The longest TTL accepted, in milliseconds (24 hours). A longer lease is almost surely a unit mistake; hold longer with extensions. */
export const MAX_TTL_MS = 86_400_000;
/** The most resources one lock may cover. */
export const MAX_RESOURCES = 64;
/** The longest resource name accepted, in UTF-16 code units. */
export const MAX_RESOURCE_LENGTH = 1024;

/** The defaults, frozen. Options derived from the TTL are absent here and computed per call. */
export const DEFAULT_OPTIONS = Object.freeze({
  /** See {@link RedlockOptions.driftFactor}. */
  driftFactor: 0.01,
  /** See {@link RedlockOptions.maxAttempts}. */
  maxAttempts: 10,
  /** See {@link RedlockOptions.acquireTimeoutMs}. */
  acquireTimeoutMs: undefined,
  /** See {@link RedlockOptions.retryBaseDelayMs}. */
  retryBaseDelayMs: 100,
  /** See {@link RedlockOptions.retryMaxDelayMs}. */
  retryMaxDelayMs: 2000,
  /** See {@link RedlockOptions.retryDelay}. */
  retryDelay: undefined,
  /** See {@link RedlockOptions.maxExtensions}. */
  maxExtensions: 100,
  /** See {@link RedlockOptions.maxHoldMs}. */
  maxHoldMs: undefined,
  /** See {@link RedlockOptions.autoExtendThreshold}. */
  autoExtendThreshold: 0.5,
  /** See {@link RedlockOptions.keyPrefix}. */
  keyPrefix: "",
  /** See {@link RedlockOptions.clock}. */
  clock: monotonicClock,
  /** See {@link RedlockOptions.fencing}. */
  fencing: false,
  /** See {@link RedlockOptions.faultTolerance}. */
  faultTolerance: 0,
  /** See {@link RedlockOptions.quarantineMs}. */
  quarantineMs: 60_000,
  /** See {@link RedlockOptions.requestBudget}. */
  requestBudget: 40,
} as const);

/** Every option name a {@link RedlockOptions} object may carry. Anything else is refused as a likely typo. */
export const OPTION_NAMES: readonly string[] = Object.freeze([
  "quorum",
  "driftFactor",
  "requestTimeoutMs",
  "minValidityMs",
  "maxAttempts",
  "acquireTimeoutMs",
  "retryBaseDelayMs",
  "retryMaxDelayMs",
  "retryDelay",
  "maxExtensions",
  "maxHoldMs",
  "autoExtendThreshold",
  "keyPrefix",
  "clock",
  "fencing",
  "faultTolerance",
  "quarantineMs",
  "requestBudget",
  "onAttempt",
  "onNodeError",
  "onLockLost",
  "onReleaseError",
  "onPoll",
]);

/** Options with every value resolved for one call with a given TTL. */
export interface ResolvedOptions extends RedlockHooks {
  /** {@link RedlockOptions.quorum}, resolved. */
  quorum: number;
  /** {@link RedlockOptions.driftFactor}, resolved. */
  driftFactor: number;
  /** {@link RedlockOptions.requestTimeoutMs}, resolved. */
  requestTimeoutMs: number;
  /** {@link RedlockOptions.minValidityMs}, resolved. */
  minValidityMs: number;
  /** {@link RedlockOptions.maxAttempts}, resolved. */
  maxAttempts: number;
  /** {@link RedlockOptions.acquireTimeoutMs}, resolved. */
  acquireTimeoutMs: number | undefined;
  /** {@link RedlockOptions.retryBaseDelayMs}, resolved. */
  retryBaseDelayMs: number;
  /** {@link RedlockOptions.retryMaxDelayMs}, resolved. */
  retryMaxDelayMs: number;
  /** {@link RedlockOptions.retryDelay}, resolved. */
  retryDelay: ((context: RetryContext) => number | null) | undefined;
  /** {@link RedlockOptions.maxExtensions}, resolved. */
  maxExtensions: number;
  /** {@link RedlockOptions.maxHoldMs}, resolved. */
  maxHoldMs: number | undefined;
  /** {@link RedlockOptions.autoExtendThreshold}, resolved. */
  autoExtendThreshold: number;
  /** {@link RedlockOptions.keyPrefix}, resolved. */
  keyPrefix: string;
  /** {@link RedlockOptions.clock}, resolved. */
  clock: Clock;
  /** {@link RedlockOptions.fencing}, resolved. */
  fencing: Fencing | false;
  /** {@link RedlockOptions.faultTolerance}, resolved. */
  faultTolerance: number;
  /** {@link RedlockOptions.quarantineMs}, resolved. */
  quarantineMs: number;
  /** {@link RedlockOptions.requestBudget}, resolved. */
  requestBudget: number;
}

/**
 * Merge base options and per-call overrides and validate them for a TTL.
 * @throws {InvalidArgumentError} for an out-of-range value.
 */
export function resolveOptions(
  base: RedlockOptions,
  overrides: RedlockOptions | undefined,
  ttlMs: number,
  nodeCount: number,
  makeError: (message: string) => Error = (message) => new InvalidArgumentError(message),
): ResolvedOptions {
  const given = { ...stripUndefined(base), ...stripUndefined(overrides ?? {}) };
  const merged = { ...DEFAULT_OPTIONS, ...given };
  const o: ResolvedOptions = {
    ...merged,
    // A time budget bounds the attempts by itself unless a count was asked for as well.
    maxAttempts: given.maxAttempts ?? (merged.acquireTimeoutMs === undefined ? DEFAULT_OPTIONS.maxAttempts : Infinity),
    // Tolerating f nodes that silently forget needs any two quorums to share f + 1 nodes.
    quorum: Math.min(
      nodeCount,
      Math.max(merged.quorum ?? 0, Math.floor((nodeCount + (merged.faultTolerance ?? 0)) / 2) + 1),
    ),
    requestTimeoutMs: merged.requestTimeoutMs ?? Math.min(1000, Math.max(50, Math.floor(ttlMs / 10))),
    minValidityMs: merged.minValidityMs ?? Math.floor(ttlMs / 10),
  };
  const fail = (name: keyof ResolvedOptions, expected: string, value: unknown = o[name]): never => {
    const shown =
      typeof value === "function"
        ? "a function"
        : value !== null && typeof value === "object"
          ? "an object"
          : String(value);
    throw makeError(`${name} must be ${expected}, got ${shown}`);
  };
  const majority = Math.floor(nodeCount / 2) + 1;
  if (!isInteger(o.faultTolerance, 0, nodeCount - 1)) fail("faultTolerance", `an integer from 0 to ${nodeCount - 1}`);
  if (merged.quorum !== undefined && !isInteger(merged.quorum, majority, nodeCount)) {
    fail("quorum", `an integer from ${majority} (a majority of ${nodeCount} nodes) to ${nodeCount}`, merged.quorum);
  }
  if (o.fencing !== false && (typeof o.fencing !== "object" || o.fencing?.kind !== "fencing")) {
    fail(
      "fencing",
      'the fencing value of edge-redlock/fencing (import { fencing } from "edge-redlock/fencing"), or false',
    );
  }
  // Durations in ms, with their least value; undefined where the option may be left out.
  for (const [name, min] of [
    ["quarantineMs", 1],
    ["requestTimeoutMs", 1],
    ["minValidityMs", 0],
    ["acquireTimeoutMs", 1],
    ["retryBaseDelayMs", 0],
    ["retryMaxDelayMs", o.retryBaseDelayMs],
    ["maxHoldMs", 1],
  ] as const) {
    const value = o[name];
    const optional = name === "acquireTimeoutMs" || name === "maxHoldMs";
    if (!(optional && value === undefined) && !isInteger(value, min, MAX_DELAY_MS)) {
      fail(name, `an integer from ${min} to ${MAX_DELAY_MS}`);
    }
  }
  if (!isFiniteIn(o.driftFactor, 0, 0.5)) fail("driftFactor", "a number in [0, 0.5)");
  if (o.maxAttempts !== Infinity && !isInteger(o.maxAttempts, 1)) fail("maxAttempts", "a positive integer or Infinity");
  if (o.retryDelay !== undefined && typeof o.retryDelay !== "function") {
    fail(
      "retryDelay",
      typeof o.retryDelay === "number"
        ? `a function ({ attempt, report }) => ms | null, not a number: for a fixed delay write retryDelay: () => ${o.retryDelay}`
        : "a function ({ attempt, report }) => ms | null",
    );
  }
  if (!isInteger(o.maxExtensions, 0)) fail("maxExtensions", "a non-negative integer");
  if (!isFiniteIn(o.autoExtendThreshold, 0, 1) || o.autoExtendThreshold === 0) {
    fail("autoExtendThreshold", "a number in (0, 1)");
  }
  if (o.requestBudget !== Infinity && !isInteger(o.requestBudget, 2 * nodeCount)) {
    fail(
      "requestBudget",
      `Infinity or an integer of at least ${2 * nodeCount} (an attempt and the release on ${nodeCount} nodes)`,
    );
  }
  if (typeof o.keyPrefix !== "string") fail("keyPrefix", "a string");
  if (typeof o.clock?.now !== "function") fail("clock", "an object with a now() method");
  return o;
}

function stripUndefined<T extends object>(object: T): Partial<T> {
  return Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Whether `value` is an integer from `min` to `max`. */
function isInteger(value: unknown, min: number, max = Number.POSITIVE_INFINITY): value is number {
  return Number.isInteger(value) && (value as number) >= min && (value as number) <= max;
}

function isFiniteIn(value: unknown, min: number, maxExclusive: number): boolean {
  return typeof value === "number" && Number.isFinite(value) && value >= min && value < maxExclusive;
}

/**
 * The `fencing` option's value: `fencing` from `edge-redlock/fencing`. Opaque: what it does lives
 * in that module, which the core never imports.
 */
export interface Fencing {
  /** Tells the fencing value apart from `false`. */
  readonly kind: "fencing";
}

/** What is being acquired, resolved and validated once per `acquire()` call. */
export interface AcquireRequest {
  /** Sorted resource names. */
  readonly resources: readonly string[];
  /** Their keys, in the same order. */
  readonly keys: readonly string[];
  readonly ttlMs: number;
  readonly options: ResolvedOptions;
  /** Counts the call's requests, for its request budget (absent for a lock's own cleanup). */
  readonly meter?: RequestMeter | undefined;
}

/**
 * Whether `next` more requests after `sent` leave the release of the lock (one request per node of
 * `nodeCount`) within `requestBudget`: what every part of an acquisition asks before it sends more.
 */
export function withinBudget(o: ResolvedOptions, sent: number, next: number, nodeCount: number): boolean {
  return sent + next + nodeCount <= o.requestBudget;
}
