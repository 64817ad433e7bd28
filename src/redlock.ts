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
  InvalidArgumentError,
  LockExpiredError,
  LockHeldError,
  LockLostError,
  QuorumUnavailableError,
  type RedlockError,
  ValidityExhaustedError,
} from "./errors.js";
import { type FanOutOptions, fanOut } from "./fanout.js";
import { Lock, type LockOperations, type ReleaseResult, type VerifyResult } from "./lock.js";
import { acquireOnNode, extendOnNode, inspectOnNode, releaseOnNode, verifyOnNode } from "./node-operations.js";
import {
  type RedlockHooks,
  type RedlockOptions,
  type ResolvedOptions,
  resolveOptions,
  validateResources,
  validateTtl,
} from "./options.js";
import { driftMs, isFailure, refusalReason, validityMs } from "./quorum.js";
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

/** Per-call options of `using`. */
export interface UsingOptions extends AcquireOptions {
  /**
   * Hand the final release to the platform instead of awaiting it, e.g. Workers'
   * `ctx.waitUntil` or Vercel's `waitUntil`: the response is not held up by the release round
   * trip, and the runtime keeps the request alive until it is done.
   * @default undefined (the release is awaited before `using` resolves)
   */
  waitUntil?: ((promise: Promise<unknown>) => void) | undefined;
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

type FanSpec = Pick<FanOutOptions, "yes" | "task" | "startAfter"> & { signal?: AbortSignal | undefined };

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
      release: (lock) =>
        // A straggling acquire request could still land after our DEL: wait for it first.
        this.#releaseKeys(
          lock.resources,
          lock.keys,
          lock.token,
          this.#resolve(undefined, lock.ttlMs),
          (i) => lock.acquireFinished[i] as Promise<void>,
        ),
      verify: (lock, overrides) => this.#verify(lock, overrides),
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
    options?: UsingOptions,
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
      const releasing = this.#releaseAfter(extending, lock, o);
      if (options?.waitUntil) options.waitUntil(releasing);
      else await releasing;
    }
  }

  /** Release once auto-extension has stopped; a release without quorum goes to `onReleaseError`. Never rejects. */
  async #releaseAfter(extending: Promise<void>, lock: Lock, o: ResolvedOptions): Promise<void> {
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

  /**
   * Read a resource's key on every node: its value (the holder's token) and PTTL, or the error.
   * A diagnostic, not a lock check: the answer can be stale by the time it arrives.
   */
  async inspect(resource: string, options?: RedlockOptions): Promise<InspectResult> {
    const [checked] = validateResources(resource);
    const o = this.#resolve(options, 10_000);
    const key = o.keyPrefix + checked;
    const values: ({ value: string | null; pttlMs: number } | undefined)[] = [];
    const fan = this.#fan(o, "inspect", [checked as string], {
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
   * Extend a lock known only by its resources and token, e.g. one acquired by another request or
   * isolate. Compare-and-PEXPIRE on every node: it never revives an expired or foreign key. The
   * validity is measured from this call's start.
   * @returns the extension's report; `validityMs` is what is left of the new TTL.
   * @throws {ExtendError} when no quorum extended it with enough validity.
   */
  async extend(
    resources: string | readonly string[],
    token: string,
    ttlMs: number,
    options?: RedlockOptions,
  ): Promise<AttemptReport> {
    const sorted = validateResources(resources);
    validateToken(token);
    const o = this.#resolveWithTtl(options, ttlMs);
    const { report } = await this.#extendKeys(sorted, keysOf(sorted, o), token, ttlMs, o, 1);
    return report;
  }

  /**
   * Release a lock known only by its resources and token. Compare-and-DEL on every node;
   * idempotent, never throws for an expired lock.
   */
  async release(
    resources: string | readonly string[],
    token: string,
    options?: RedlockOptions,
  ): Promise<ReleaseResult> {
    const sorted = validateResources(resources);
    validateToken(token);
    const o = this.#resolve(options, 10_000);
    return this.#releaseKeys(sorted, keysOf(sorted, o), token, o);
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
    const o = this.#resolveWithTtl(options, ttlMs);
    const signal = options?.signal;
    const keys = keysOf(sorted, o);
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
    const { report, fan, deadline } = await this.#vote(o, "acquire", resources, attempt, ttlMs, {
      yes: "acquired",
      signal,
      task: (i, context) => acquireOnNode(this.#node(i), keys, token, ttlMs, context),
    });
    if (report.ok) {
      const lock = new Lock({
        resources,
        keys,
        token,
        ttlMs,
        startedAt: fan.startedAt,
        deadline,
        minValidityMs: o.minValidityMs,
        onLost: (error) => callHook(o.onLockLost, { resources, error }),
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

  /**
   * Run one operation on every node, decide it, and report it. With `ttlMs`, also compute the
   * validity and the deadline it gives (`t0 + ttl - drift`, anchored before the first send).
   */
  async #vote(
    o: ResolvedOptions,
    operation: Operation,
    resources: readonly string[],
    attempt: number,
    ttlMs: number | undefined,
    spec: FanSpec,
  ) {
    const fan = this.#fan(o, operation, resources, spec);
    const decided = await fan.decided;
    const elapsedMs = decided.decidedAt - fan.startedAt;
    const validity =
      ttlMs === undefined ? undefined : validityMs(ttlMs, fan.startedAt, decided.decidedAt, o.driftFactor);
    const report: AttemptReport = {
      operation,
      attempt,
      resources,
      quorum: o.quorum,
      votes: decided.outcomes.filter((n) => n.outcome === spec.yes).length,
      elapsedMs,
      ...(validity === undefined ? {} : { validityMs: validity }),
      ok: decided.granted && (validity === undefined || validity > o.minValidityMs),
      nodes: decided.outcomes,
      requests: decided.requests,
    };
    callHook(o.onAttempt, report);
    return { report, fan, decided, deadline: decided.decidedAt + (validity ?? 0) };
  }

  async #extend(lock: Lock, ttlMs: number, overrides: RedlockOptions | undefined): Promise<AttemptReport> {
    const o = this.#resolveWithTtl(overrides, ttlMs);
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
    try {
      const { report, deadline } = await this.#extendKeys(
        lock.resources,
        lock.keys,
        lock.token,
        ttlMs,
        o,
        lock.extensions + 1,
      );
      lock.extended(deadline);
      return report;
    } catch (error) {
      if (error instanceof ExtendError && error.cause instanceof LockLostError) lock.lose(error.cause);
      throw error;
    }
  }

  /** Compare-and-PEXPIRE on every node. Throws {@link ExtendError}; its cause is a {@link LockLostError} when a quorum no longer holds the token. */
  async #extendKeys(
    resources: readonly string[],
    keys: readonly string[],
    token: string,
    ttlMs: number,
    o: ResolvedOptions,
    attempt: number,
  ) {
    const what = resources.join(", ");
    const { report, deadline } = await this.#vote(o, "extend", resources, attempt, ttlMs, {
      yes: "extended",
      task: (i, context) => extendOnNode(this.#node(i), keys, token, ttlMs, context),
    });
    if (report.ok) return { report, deadline };
    if (report.votes >= o.quorum) {
      throw new ExtendError(`extended ${what} with only ${Math.round(report.validityMs ?? 0)} ms of validity left`, [
        report,
      ]);
    }
    if (
      refusalReason(
        report.nodes.map((n) => n.outcome),
        o.quorum,
      ) === "held"
    ) {
      // A quorum no longer holds our token: the lock is gone, whatever the local deadline says.
      const lost = new LockLostError(`lock on ${what} is no longer held on a quorum`, { attempts: [report] });
      throw new ExtendError(
        `could not extend ${what}: the lock is no longer held (${summary(report)})`,
        [report],
        lost,
      );
    }
    throw new ExtendError(`could not extend ${what}: ${summary(report)}`, [report]);
  }

  /** Compare-and-DEL on every node; resolves once the outcome is clear, slow nodes finish in the background. */
  async #releaseKeys(
    resources: readonly string[],
    keys: readonly string[],
    token: string,
    o: ResolvedOptions,
    startAfter?: (index: number) => Promise<unknown>,
  ): Promise<ReleaseResult> {
    const { report, fan } = await this.#vote(o, "release", resources, 1, undefined, {
      yes: "released",
      startAfter,
      task: (i, context) => releaseOnNode(this.#node(i), keys, token, context),
    });
    this.#inBackground(Promise.all(fan.outcomes));
    return { released: report.votes, nodes: report.nodes, report };
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

  async #verify(lock: Lock, overrides: RedlockOptions | undefined): Promise<VerifyResult> {
    const o = this.#resolve(overrides, lock.ttlMs);
    const pttls: (number | undefined)[] = [];
    const { report, decided, fan } = await this.#vote(o, "verify", lock.resources, 1, undefined, {
      yes: "verified",
      task: async (i, context) => {
        const pttl = await verifyOnNode(this.#node(i), lock.keys, lock.token, context);
        pttls[i] = pttl;
        return pttl > 0 ? "verified" : "held";
      },
    });
    // The servers' own clocks decide expiry: the quorum-th longest PTTL, less the time since the
    // request left and the drift allowance, bounds what is left.
    const remaining = pttls.filter((p): p is number => p !== undefined && p > 0).sort((a, b) => b - a);
    const quorumPttl = remaining[o.quorum - 1];
    const elapsed = decided.decidedAt - fan.startedAt;
    const serverRemaining =
      quorumPttl === undefined ? Number.NEGATIVE_INFINITY : quorumPttl - elapsed - driftMs(quorumPttl, o.driftFactor);
    const remainingMs = Math.min(lock.remainingMs(), serverRemaining);
    const held = report.ok && remainingMs > o.minValidityMs;
    if (
      !report.ok &&
      refusalReason(
        report.nodes.map((n) => n.outcome),
        o.quorum,
      ) === "held"
    ) {
      lock.lose(
        new LockLostError(`lock on ${lock.resources.join(", ")} is no longer held on a quorum`, { attempts: [report] }),
      );
    }
    return { held, remainingMs: held ? remainingMs : Math.min(remainingMs, 0), report };
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

  /** Start `spec` on every node with the resolved deadline and quorum; node errors go to `onNodeError`. */
  #fan(o: ResolvedOptions, operation: Operation, resources: readonly string[], spec: FanSpec) {
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

  /** Resolve the options for a TTL given by the caller, validating the TTL against them. */
  #resolveWithTtl(overrides: RedlockOptions | undefined, ttlMs: number): ResolvedOptions {
    validateTtl(ttlMs);
    const o = this.#resolve(overrides, ttlMs);
    validateTtl(ttlMs, o);
    return o;
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

/** The Redis keys of the (sorted) resources. */
function keysOf(resources: readonly string[], o: ResolvedOptions): string[] {
  return resources.map((r) => o.keyPrefix + r);
}

function validateToken(token: unknown): asserts token is string {
  if (typeof token !== "string" || token.length === 0 || token.length > 256) {
    throw new InvalidArgumentError("token must be a non-empty string of at most 256 characters");
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
