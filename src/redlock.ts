/**
 * The Redlock client: acquire, tryAcquire, using and inspect over N independent nodes.
 * @module
 */
import { fullJitterDelay } from "./backoff.js";
import {
  AbortedError,
  AcquireTimeoutError,
  ConfigurationError,
  ExtendError,
  ExtensionLimitError,
  LockExpiredError,
  LockHeldError,
  LockLostError,
  QuorumUnavailableError,
  type RedlockError,
  ValidityExhaustedError,
} from "./errors.js";
import { type FanOutOptions, fanOut } from "./fanout.js";
import { Lock, type LockOperations, type ReleaseResult } from "./lock.js";
import { acquireOnNode, extendOnNode, inspectOnNode, releaseOnNode } from "./node-operations.js";
import {
  type RedlockHooks,
  type RedlockOptions,
  type ResolvedOptions,
  resolveOptions,
  validateResources,
  validateTtl,
} from "./options.js";
import { isFailure, refusalReason, validityMs } from "./quorum.js";
import type { AttemptReport, NodeOutcome, Operation } from "./report.js";
import { anySignal, sleep } from "./signals.js";
import { randomToken } from "./token.js";
import { type RedisNode, type RestNodeConfig, restNode } from "./transport.js";

/** A node: a REST endpoint `{ url, token }`, or any {@link RedisNode} (e.g. from `edge-redlock/upstash`). */
export type NodeConfig = RestNodeConfig | RedisNode;

/** Configuration of a {@link Redlock} client. */
export interface RedlockConfig extends RedlockOptions {
  /** The independent Redis nodes. Use an odd number, 3 or more, on separate machines or providers. */
  nodes: readonly NodeConfig[];
}

/** Per-call options of `acquire`, `tryAcquire` and `using`. */
export interface AcquireOptions extends RedlockOptions {
  /** Cancels the acquisition (and, in `using`, is passed on to the routine's signal). */
  signal?: AbortSignal | undefined;
}

/** One node's view of a key, from {@link Redlock.inspect}. */
export type InspectedNode =
  | { readonly node: string; readonly value: string | null; readonly pttlMs: number }
  | { readonly node: string; readonly error: Error };

/** What {@link Redlock.inspect} returns. */
export interface InspectResult {
  readonly resource: string;
  readonly key: string;
  readonly nodes: readonly InspectedNode[];
}

type AttemptResult = { lock: Lock; report: AttemptReport } | { lock?: undefined; report: AttemptReport };

/**
 * A Redlock client over N independent Redis nodes reached by `fetch`.
 *
 * @example
 * ```ts
 * const redlock = new Redlock({ nodes: [{ url, token }, { url: url2, token: token2 }, { url: url3, token: token3 }] });
 * await redlock.using("invoice:42", 10_000, async (signal) => {
 *   await chargeCustomer({ signal });
 * });
 * ```
 * @see https://redis.io/docs/latest/develop/use/patterns/distributed-locks/
 */
export class Redlock {
  /** The nodes, in configuration order. */
  readonly nodes: readonly RedisNode[];
  readonly #options: RedlockOptions;
  readonly #background = new Set<Promise<unknown>>();
  readonly #lockOperations: LockOperations;

  /**
   * @throws {ConfigurationError} for an empty node list, duplicate nodes, a bad URL or token, or an invalid option.
   */
  constructor(config: RedlockConfig) {
    if (typeof config !== "object" || config === null)
      throw new ConfigurationError("new Redlock() needs a config object");
    const { nodes, ...options } = config;
    if (!Array.isArray(nodes) || nodes.length === 0) {
      throw new ConfigurationError("nodes must be a non-empty array of { url, token } or RedisNode");
    }
    this.nodes = Object.freeze(nodes.map(toNode));
    const seen = new Set<string>();
    for (const node of this.nodes) {
      if (seen.has(node.id)) throw new ConfigurationError(`node listed twice: ${node.id}`, { node: node.id });
      seen.add(node.id);
    }
    // Validate the options once now with a nominal TTL, so mistakes fail at construction.
    resolveOptions(options, undefined, 10_000, this.nodes.length, (m) => new ConfigurationError(m));
    this.#options = Object.freeze({ ...options });
    this.#lockOperations = {
      extend: (lock, ttlMs, overrides) => this.#extend(lock, ttlMs, overrides),
      release: (lock) => this.#release(lock),
      lost: (lock, error) => callHook(this.#options.onLockLost, { resources: lock.resources, error }),
    };
  }

  /**
   * Acquire a lock, retrying with backoff while it is held elsewhere or nodes fail.
   * @param resources one resource name or several (locked all-or-nothing).
   * @param ttlMs lease in milliseconds; the lock expires by itself after it unless extended.
   * @throws {LockHeldError} the lock stayed held elsewhere through every attempt.
   * @throws {QuorumUnavailableError} too many nodes failed (errors, timeouts).
   * @throws {ValidityExhaustedError} a quorum agreed but too little validity was left.
   * @throws {AcquireTimeoutError} `acquireTimeoutMs` passed.
   * @throws {AbortedError} `options.signal` aborted.
   * @throws {ConfigurationError} a node rejected its token.
   * @throws {InvalidArgumentError} bad resources, TTL or option (nothing was sent).
   */
  async acquire(resources: string | readonly string[], ttlMs: number, options?: AcquireOptions): Promise<Lock> {
    return this.#acquire(resources, ttlMs, options, false);
  }

  /**
   * Make a single attempt. Resolves `null` when the lock is held elsewhere; still throws for
   * node failures, so an outage is never mistaken for contention.
   */
  async tryAcquire(
    resources: string | readonly string[],
    ttlMs: number,
    options?: AcquireOptions,
  ): Promise<Lock | null> {
    try {
      return await this.#acquire(resources, ttlMs, options, true);
    } catch (error) {
      if (error instanceof LockHeldError) return null;
      throw error;
    }
  }

  /**
   * Run `routine` under a lock: acquire, extend automatically before expiry, release in `finally`.
   * The routine gets a signal that aborts (reason {@link LockLostError}) *before* the lock can be
   * lost, or when `options.signal` aborts. The routine's own error always wins over a release
   * problem, which goes to the `onReleaseError` hook.
   */
  async using<T>(
    resources: string | readonly string[],
    ttlMs: number,
    routine: (signal: AbortSignal, lock: Lock) => Promise<T>,
    options?: AcquireOptions,
  ): Promise<T> {
    const lock = await this.acquire(resources, ttlMs, options);
    const o = this.#resolve(options, ttlMs);
    const stop = new AbortController();
    const extending = this.#autoExtend(lock, ttlMs, o, stop.signal);
    const signal = options?.signal ? anySignal([lock.signal, options.signal]) : lock.signal;
    try {
      return await routine(signal, lock);
    } finally {
      stop.abort();
      await extending;
      const result = await lock.release();
      if (result.released < o.quorum && result.nodes.some((n) => isFailure(n.outcome))) {
        callHook(o.onReleaseError, {
          resources: lock.resources,
          error: new QuorumUnavailableError(
            `could not release ${lock.resources.join(", ")} on a quorum; it expires by its TTL`,
            [result.report],
          ),
        });
      }
    }
  }

  /**
   * Read a resource's key on every node: its value (the holder's token) and PTTL, or the error.
   * A diagnostic, not a lock check: the answer can be stale by the time it arrives.
   */
  async inspect(resource: string, options?: RedlockOptions): Promise<InspectResult> {
    const [checked] = validateResources(resource);
    const o = this.#resolve(options, 10_000);
    const key = o.keyPrefix + checked;
    const values: ({ value: string | null; pttlMs: number } | undefined)[] = [];
    const fan = this.#fanOut(o, "inspect", [checked as string], {
      yes: "acquired",
      task: async (i, context) => {
        values[i] = await inspectOnNode(this.#node(i), key, context);
        return "acquired";
      },
    });
    const outcomes = await Promise.all(fan.outcomes);
    return {
      resource: checked as string,
      key,
      nodes: outcomes.map((outcome, i) => {
        const value = values[i];
        return outcome.error || !value
          ? { node: outcome.node, error: outcome.error ?? new Error("no answer") }
          : { node: outcome.node, ...value };
      }),
    };
  }

  /**
   * Resolves when the background work started so far has finished: releases of failed attempts
   * and of stragglers. On Workers, pass it to `ctx.waitUntil()` so that work is not cut off.
   */
  async settled(): Promise<void> {
    while (this.#background.size > 0) await Promise.all(this.#background);
  }

  async #acquire(
    resources: string | readonly string[],
    ttlMs: number,
    options: AcquireOptions | undefined,
    single: boolean,
  ): Promise<Lock> {
    const sorted = validateResources(resources);
    validateTtl(ttlMs);
    const o = this.#resolve(options, ttlMs);
    validateTtl(ttlMs, o);
    const signal = options?.signal;
    const keys = sorted.map((r) => o.keyPrefix + r);
    const maxAttempts = single ? 1 : o.maxAttempts;
    const deadline = o.acquireTimeoutMs === undefined ? Number.POSITIVE_INFINITY : o.clock.now() + o.acquireTimeoutMs;
    const reports: AttemptReport[] = [];
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw abortedError(sorted, reports, signal.reason);
      const result = await this.#attempt(sorted, keys, ttlMs, o, attempt, signal);
      reports.push(result.report);
      if (result.lock) return result.lock;
      const configError = result.report.nodes.find((n) => n.error instanceof ConfigurationError)?.error;
      if (configError) throw configError;
      if (signal?.aborted) throw abortedError(sorted, reports, signal.reason);
      if (attempt >= maxAttempts) throw failureError(sorted, reports, o.quorum);
      const delay = o.retryDelay
        ? o.retryDelay({ attempt, report: result.report })
        : fullJitterDelay(attempt, o.retryBaseDelayMs, o.retryMaxDelayMs, Math.random());
      if (delay === null) throw failureError(sorted, reports, o.quorum);
      if (o.clock.now() + delay >= deadline) {
        throw new AcquireTimeoutError(
          `could not acquire ${sorted.join(", ")} within ${o.acquireTimeoutMs} ms (${attempt} attempts): ${summary(result.report)}`,
          reports,
        );
      }
      try {
        await sleep(delay, signal);
      } catch (reason) {
        throw abortedError(sorted, reports, reason);
      }
    }
  }

  async #attempt(
    resources: string[],
    keys: string[],
    ttlMs: number,
    o: ResolvedOptions,
    attempt: number,
    signal: AbortSignal | undefined,
  ): Promise<AttemptResult> {
    // A fresh token per attempt: cleanup of a failed attempt can then never delete the keys of a
    // later, successful one.
    const token = randomToken();
    const fan = this.#fanOut(o, "acquire", resources, {
      yes: "acquired",
      signal,
      task: (i, context) => acquireOnNode(this.#node(i), keys, token, ttlMs, context),
    });
    const decided = await fan.decided;
    const validity = validityMs(ttlMs, fan.startedAt, decided.decidedAt, o.driftFactor);
    const ok = decided.granted && validity > o.minValidityMs;
    const report: AttemptReport = {
      operation: "acquire",
      attempt,
      resources,
      quorum: o.quorum,
      votes: decided.outcomes.filter((n) => n.outcome === "acquired").length,
      elapsedMs: decided.decidedAt - fan.startedAt,
      validityMs: validity,
      ok,
      nodes: decided.outcomes,
      requests: decided.requests,
    };
    callHook(o.onAttempt, report);
    if (ok) {
      const lock = new Lock({
        resources,
        keys,
        token,
        ttlMs,
        startedAt: fan.startedAt,
        // decidedAt + validity = t0 + ttl - drift: the deadline is anchored before the first send.
        deadline: decided.decidedAt + validity,
        minValidityMs: o.minValidityMs,
        now: () => o.clock.now(),
        report,
        operations: this.#lockOperations,
        acquireFinished: fan.finished,
      });
      return { lock, report };
    }
    // Failed: undo on every node once its request has finished, including stragglers whose SET
    // lands after the vote. A definite "held" wrote nothing (SET NX and the all-or-none script
    // are atomic), so those nodes need no request.
    this.#inBackground(
      Promise.all(
        fan.outcomes.map(async (outcome, i) => {
          if ((await outcome).outcome === "held") return;
          await fan.finished[i];
          await this.#releaseOne(i, keys, token, o, resources);
        }),
      ),
    );
    return { report };
  }

  async #extend(lock: Lock, ttlMs: number, overrides: RedlockOptions | undefined): Promise<AttemptReport> {
    validateTtl(ttlMs);
    const o = this.#resolve(overrides, ttlMs);
    validateTtl(ttlMs, o);
    const what = lock.resources.join(", ");
    if (lock.released) throw new LockExpiredError(`lock on ${what} was released; acquire it again`);
    if (lock.remainingMs() <= 0) throw new LockExpiredError(`lock on ${what} has expired; acquire it again`);
    if (lock.extensions >= o.maxExtensions) {
      throw new ExtensionLimitError(`lock on ${what} was already extended ${lock.extensions} times (maxExtensions)`);
    }
    if (o.maxHoldMs !== undefined && o.clock.now() + ttlMs - lock.startedAt > o.maxHoldMs) {
      throw new ExtensionLimitError(
        `extending lock on ${what} by ${ttlMs} ms would hold it past maxHoldMs ${o.maxHoldMs}`,
      );
    }
    const fan = this.#fanOut(o, "extend", lock.resources, {
      yes: "extended",
      task: (i, context) => extendOnNode(this.#node(i), lock.keys, lock.token, ttlMs, context),
    });
    const decided = await fan.decided;
    const validity = validityMs(ttlMs, fan.startedAt, decided.decidedAt, o.driftFactor);
    const ok = decided.granted && validity > o.minValidityMs;
    const report: AttemptReport = {
      operation: "extend",
      attempt: lock.extensions + 1,
      resources: lock.resources,
      quorum: o.quorum,
      votes: decided.outcomes.filter((n) => n.outcome === "extended").length,
      elapsedMs: decided.decidedAt - fan.startedAt,
      validityMs: validity,
      ok,
      nodes: decided.outcomes,
      requests: decided.requests,
    };
    callHook(o.onAttempt, report);
    if (ok) {
      lock.extended(decided.decidedAt + validity);
      return report;
    }
    const kinds = decided.outcomes.map((n) => n.outcome);
    if (decided.granted) {
      throw new ExtendError(`extended ${what} with only ${Math.round(validity)} ms of validity left`, [report]);
    }
    if (refusalReason(kinds, o.quorum) === "held") {
      // A quorum no longer holds our token: the lock is gone, whatever the local deadline says.
      const error = new LockLostError(`lock on ${what} is no longer held on a quorum`, { attempts: [report] });
      lock.lose(error);
      throw new ExtendError(
        `could not extend ${what}: the lock is no longer held (${summary(report)})`,
        [report],
        error,
      );
    }
    throw new ExtendError(`could not extend ${what}: ${summary(report)}`, [report]);
  }

  async #release(lock: Lock): Promise<ReleaseResult> {
    const o = this.#resolve(undefined, lock.ttlMs);
    const fan = this.#fanOut(o, "release", lock.resources, {
      yes: "released",
      // A straggling acquire request could still land after our DEL: wait for it first.
      startAfter: (i) => lock.acquireFinished[i] as Promise<void>,
      task: (i, context) => releaseOnNode(this.#node(i), lock.keys, lock.token, context),
    });
    // Resolve once the outcome is clear; slow nodes finish in the background (see settled()).
    this.#inBackground(Promise.all(fan.outcomes));
    const decided = await fan.decided;
    const released = decided.outcomes.filter((n) => n.outcome === "released").length;
    const report: AttemptReport = {
      operation: "release",
      attempt: 1,
      resources: lock.resources,
      quorum: o.quorum,
      votes: released,
      elapsedMs: decided.decidedAt - fan.startedAt,
      ok: decided.granted,
      nodes: decided.outcomes,
      requests: decided.requests,
    };
    callHook(o.onAttempt, report);
    return { released, nodes: decided.outcomes, report };
  }

  async #releaseOne(
    index: number,
    keys: readonly string[],
    token: string,
    o: ResolvedOptions,
    resources: readonly string[],
  ): Promise<NodeOutcome> {
    const node = this.#node(index);
    const fan = fanOut({
      nodeIds: [node.id],
      quorum: 1,
      yes: "released",
      timeoutMs: o.requestTimeoutMs,
      clock: o.clock,
      task: (_, context) => releaseOnNode(node, keys, token, context),
      onNodeSettled: (outcome) => this.#nodeSettled(o, "release", resources, outcome),
    });
    return (await fan.outcomes[0]) as NodeOutcome;
  }

  async #autoExtend(lock: Lock, ttlMs: number, o: ResolvedOptions, stop: AbortSignal): Promise<void> {
    const stopped = anySignal([stop, lock.signal]);
    let retryDelay = 0;
    while (!stopped.aborted) {
      const wait = retryDelay || lock.remainingMs() - ttlMs * o.autoExtendThreshold;
      try {
        if (wait > 0) await sleep(wait, stopped);
      } catch {
        return;
      }
      try {
        await lock.extend(ttlMs);
        retryDelay = 0;
      } catch (error) {
        // Limits, expiry and a lost lock are final: the lock's signal reports them. A failed
        // quorum may be transient: try again soon while validity is left.
        if (!(error instanceof ExtendError) || lock.signal.aborted) return;
        retryDelay = Math.max(10, Math.min(o.retryBaseDelayMs, (lock.remainingMs() - o.minValidityMs) / 4));
      }
    }
  }

  #fanOut(
    o: ResolvedOptions,
    operation: Operation,
    resources: readonly string[],
    spec: Pick<FanOutOptions, "yes" | "task" | "startAfter"> & { signal?: AbortSignal | undefined },
  ) {
    return fanOut({
      nodeIds: this.nodes.map((n) => n.id),
      quorum: o.quorum,
      timeoutMs: o.requestTimeoutMs,
      clock: o.clock,
      ...spec,
      onNodeSettled: (outcome) => this.#nodeSettled(o, operation, resources, outcome),
    });
  }

  #nodeSettled(o: RedlockHooks, operation: Operation, resources: readonly string[], outcome: NodeOutcome): void {
    if (outcome.outcome === "error" || outcome.outcome === "timeout") {
      callHook(o.onNodeError, { operation, resources, outcome });
    }
  }

  #resolve(overrides: RedlockOptions | undefined, ttlMs: number): ResolvedOptions {
    return resolveOptions(this.#options, overrides, ttlMs, this.nodes.length);
  }

  #node(index: number): RedisNode {
    return this.nodes[index] as RedisNode;
  }

  #inBackground(work: Promise<unknown>): void {
    const tracked = work.then(
      () => undefined,
      () => undefined,
    );
    this.#background.add(tracked);
    void tracked.then(() => this.#background.delete(tracked));
  }
}

function toNode(config: NodeConfig): RedisNode {
  if (typeof config !== "object" || config === null) {
    throw new ConfigurationError(`each node must be { url, token } or a RedisNode, got ${String(config)}`);
  }
  if ("command" in config && typeof config.command === "function") {
    if (typeof config.id !== "string" || config.id.length === 0)
      throw new ConfigurationError("a RedisNode needs a non-empty id");
    return config;
  }
  return restNode(config as RestNodeConfig);
}

function callHook<T>(hook: ((event: T) => void) | undefined, event: T): void {
  try {
    hook?.(event);
  } catch {
    // A hook must never break locking.
  }
}

function summary(report: AttemptReport): string {
  const counts = new Map<string, number>();
  for (const n of report.nodes) counts.set(n.outcome, (counts.get(n.outcome) ?? 0) + 1);
  const parts = [...counts].map(([k, v]) => `${v} ${k}`).join(", ");
  return `${report.votes}/${report.nodes.length} nodes agreed, quorum ${report.quorum} (${parts})`;
}

function abortedError(resources: string[], reports: AttemptReport[], reason: unknown): AbortedError {
  return new AbortedError(`acquiring ${resources.join(", ")} was aborted`, reports, reason);
}

function failureError(resources: string[], reports: AttemptReport[], quorum: number): RedlockError {
  const last = reports.at(-1) as AttemptReport;
  const what = resources.join(", ");
  const tries = `${reports.length} attempt${reports.length === 1 ? "" : "s"}`;
  if (last.votes >= quorum) {
    return new ValidityExhaustedError(
      `acquired ${what} on a quorum but only ${Math.round(last.validityMs ?? 0)} ms of validity was left (${tries})`,
      reports,
    );
  }
  if (
    refusalReason(
      last.nodes.map((n) => n.outcome),
      quorum,
    ) === "held"
  ) {
    const heldOn = last.nodes.filter((n) => n.outcome === "held").map((n) => n.node);
    return new LockHeldError(
      `${what} is held elsewhere on ${heldOn.length} nodes (${heldOn.join(", ")}) after ${tries}`,
      reports,
    );
  }
  const cause = last.nodes.find((n) => n.error)?.error;
  return new QuorumUnavailableError(`no quorum for ${what} after ${tries}: ${summary(last)}`, reports, cause);
}
