/**
 * The Redlock client: the public entry points. Each operation lives in its own module under
 * `operations/`; this class validates input, resolves options and hands over.
 * @module
 */

import { ConfigurationError, InvalidArgumentError, LockHeldError } from "../base/errors.js";
import type { AttemptReport } from "../base/report.js";
import { type RedisNode, type RestNodeConfig, restNode } from "../transport/rest.js";
import type { SettledResult } from "./background.js";
import { backoffWaiting } from "./backoff-waiting.js";
import { Cluster } from "./cluster.js";
import { Engine } from "./engine.js";
import type { ClusterResetResult } from "./fingerprint.js";
import { nodeIdentity } from "./identity.js";
import { lockKeys } from "./keys.js";
import type { Lock, LockOperations, ReleaseResult } from "./lock.js";
import { heldByCaller, insideUsing, runHolding } from "./nesting.js";
import { extendKeys, extendLock } from "./operations/extend.js";
import { type InspectResult, inspectResource } from "./operations/inspect.js";
import { releaseKeys, releaseLock } from "./operations/release.js";
import { verifyLock } from "./operations/verify.js";
import { callInput, callOptions, checkOptionNames } from "./option-names.js";
import type { AcquireRequest } from "./options.js";
import { type RedlockOptions, type ResolvedOptions, resolveOptions } from "./options.js";
import { runUnderLock } from "./using.js";
import { validateResources } from "./validate.js";
import type { ClientWaiting, WaitingStrategy } from "./waiting.js";

export type { InspectedNode, InspectResult } from "./operations/inspect.js";

/** A node: a REST endpoint `{ url, token }`, or any {@link RedisNode} (e.g. from `edge-redlock/upstash`). */
export type NodeConfig = RestNodeConfig | RedisNode;

/** Configuration of a {@link Redlock} client. */
export interface RedlockConfig extends RedlockOptions {
  /** The independent Redis nodes. Use an odd number, 3 or more, on separate machines or providers. */
  nodes: readonly NodeConfig[];
  /**
   * The name of this cluster in its fingerprint on the nodes (see docs/deployments.md), for
   * clients that reach the same nodes by different URLs. Every client of one cluster must give the
   * same name, and a changed node list needs a new name.
   * @default derived from the node list (each node's URL without credentials, or a RedisNode's id)
   */
  clusterName?: string | undefined;
}

/** Options of `inspect`. */
export interface InspectOptions extends RedlockOptions {
  /**
   * Show the holders' tokens whole. A token is a capability (a release by token accepts it): do
   * not serve it to anyone who should not release the lock.
   * @default false (shown as `…` and the last 4 characters)
   */
  revealTokens?: boolean | undefined;
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
   * trip, and the runtime keeps the request alive until it is done, slow nodes included (the
   * promise handed over ends with {@link Redlock.settled}).
   * @default undefined (the release is awaited before `using` resolves)
   */
  waitUntil?: ((promise: Promise<unknown>) => void) | undefined;
}

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
  /**
   * @internal How clients of this class wait for a held lock (see `core/waiting.ts`): backoff
   * alone here; `edge-redlock`'s `Redlock` waits in line.
   */
  static readonly waiting: WaitingStrategy = backoffWaiting;
  /** The nodes, in configuration order. */
  readonly nodes: readonly RedisNode[];
  readonly #engine: Engine;
  readonly #waiting: ClientWaiting;
  readonly #lockOperations: LockOperations;
  /**
   * @internal The client's cluster check (see `cluster.ts`), for the optional modules whose
   * acquisitions must pass it too (a semaphore's permits, a read-write lock).
   */
  readonly cluster: Cluster;

  /**
   * @throws {ConfigurationError} for an empty node list, duplicate nodes, a bad URL or token, an
   * unknown option name, or an invalid option.
   */
  constructor(config: RedlockConfig) {
    if (typeof config !== "object" || config === null)
      throw new ConfigurationError("new Redlock() needs a config object");
    checkOptionNames(config, "the Redlock config", ["nodes", "clusterName"], (m) => new ConfigurationError(m));
    const { nodes, clusterName, ...options } = config;
    if (!Array.isArray(nodes) || nodes.length === 0) {
      throw new ConfigurationError("nodes must be a non-empty array of { url, token } or RedisNode");
    }
    this.nodes = Object.freeze(nodes.map(toNode));
    // One server listed twice would vote twice. A REST node is its URL, whatever token or id it
    // was given; a RedisNode, its id.
    const seen = new Set<string>();
    nodes.forEach((config, i) => {
      const node = this.nodes[i] as RedisNode;
      const server = config === node ? node.id : new URL((config as RestNodeConfig).url).href;
      const id = `${config === node ? "node" : "url"} ${server}`;
      if (seen.has(id) || seen.has(`node ${node.id}`))
        throw new ConfigurationError(`node listed twice: ${node.id}`, { node: node.id });
      seen.add(id).add(`node ${node.id}`);
    });
    // Validate the options once now with a nominal TTL, so mistakes fail at construction.
    resolveOptions(options, undefined, 10_000, this.nodes.length, (m) => new ConfigurationError(m));
    const identities = this.nodes.map((node, i) => nodeIdentity(node, nodes[i]));
    this.cluster = new Cluster(this.nodes, nodes, identities, clusterName);
    const engine = new Engine(this.nodes, Object.freeze({ ...options }), JSON.stringify(identities));
    this.#engine = engine;
    const waiting = (new.target as typeof Redlock).waiting.forClient(engine, identities);
    this.#waiting = waiting;
    this.#lockOperations = {
      extend: (lock, ttlMs, overrides) => extendLock(engine, lock, ttlMs, callOptions(overrides, "lock.extend()")),
      release: (lock) => releaseLock(engine, waiting, lock),
      verify: (lock, overrides) => verifyLock(engine, lock, callOptions(overrides, "lock.verify()")),
    };
  }

  /**
   * Acquire a lock, retrying with backoff while it is held elsewhere or nodes fail.
   * @param resources one resource name or several (locked all-or-nothing).
   * @param ttlMs lease in milliseconds; the lock expires by itself after it unless extended.
   * @param options per-call options; the lock keeps them for its whole life (extensions, release).
   * @throws {LockHeldError} the lock stayed held elsewhere through every attempt.
   * @throws {QuorumUnavailableError} too many nodes failed (errors, timeouts).
   * @throws {ValidityExhaustedError} a quorum agreed but too little validity was left.
   * @throws {AcquireTimeoutError} `acquireTimeoutMs` passed.
   * @throws {AbortedError} `options.signal` aborted.
   * @throws {ConfigurationError} a node rejected its token.
   * @throws {InvalidArgumentError} bad resources, TTL or option (nothing was sent).
   */
  acquire(resources: string | readonly string[], ttlMs: number, options?: AcquireOptions): Promise<Lock> {
    // Not an async method: it returns the acquisition's own promise instead of wrapping it in one
    // more (a promise and ticks per call); invalid input still rejects, never throws.
    try {
      const { request, signal } = this.#request(resources, ttlMs, options, "acquire()");
      this.#refuseNested(request, "acquire()");
      const attempts = request.options.maxAttempts;
      return this.cluster.acquire(request.options, signal, request.meter, () =>
        this.#waiting.acquire(request, attempts, signal, this.#lockOperations),
      );
    } catch (error) {
      return Promise.reject(error);
    }
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
    const { request, signal } = this.#request(resources, ttlMs, options, "tryAcquire()");
    try {
      return await this.cluster.acquire(request.options, signal, request.meter, () =>
        this.#waiting.acquire(request, 1, signal, this.#lockOperations),
      );
    } catch (error) {
      if (error instanceof LockHeldError) return null;
      throw error;
    }
  }

  /**
   * Run `routine` under a lock: acquire, extend automatically before expiry, release in `finally`.
   * The routine gets a signal that aborts (reason {@link LockLostError}) *before* the lock can be
   * lost, or when `options.signal` aborts. The routine's own error always wins over a release
   * problem, which goes to the `onReleaseError` hook. Every option given here (`maxExtensions`,
   * `maxHoldMs`, `quorum`, hooks, …) holds for the extensions and the release too.
   */
  async using<T>(
    resources: string | readonly string[],
    ttlMs: number,
    routine: (signal: AbortSignal, lock: Lock) => Promise<T>,
    options?: UsingOptions,
  ): Promise<T> {
    const { request, signal, waitUntil } = this.#request(resources, ttlMs, options, "using()", ["waitUntil"]);
    this.#refuseNested(request, "using()");
    const attempts = request.options.maxAttempts;
    const lock = await this.cluster.acquire(request.options, signal, request.meter, () =>
      this.#waiting.acquire(request, attempts, signal, this.#lockOperations),
    );
    // What waitUntil keeps alive is the release and the background work it leaves (the nodes
    // slower than the quorum): on Workers the request's I/O is cancelled once its waitUntil work
    // is done, and a slow gate would not get the release at all.
    const keepAlive = waitUntil && ((releasing: Promise<unknown>) => waitUntil(releasing.then(() => this.settled())));
    return runHolding(this.#engine.scoped(request.keys), () => runUnderLock(lock, routine, signal, keepAlive));
  }

  /**
   * Read a resource's key on every node: who holds it and its PTTL, or the error. A diagnostic,
   * not a lock check: the answer can be stale by the time it arrives. The holder's token is shown
   * as `…` and its last 4 characters (a token is a capability: a release by token accepts it),
   * unless `revealTokens: true` is given.
   */
  async inspect(resource: string, options?: InspectOptions): Promise<InspectResult> {
    const [checked] = validateResources(resource);
    let reveal = false;
    let overrides: RedlockOptions | undefined = options;
    if (options !== undefined && typeof options === "object" && options !== null && "revealTokens" in options) {
      const { revealTokens, ...rest } = options;
      if (typeof revealTokens !== "boolean") throw new InvalidArgumentError("revealTokens must be true or false");
      reveal = revealTokens;
      overrides = rest;
    }
    return inspectResource(this.#engine, this.#resolve(overrides, 10_000, "inspect()"), checked as string, reveal);
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
    const o = this.#engine.resolveWithTtl(callOptions(options, "extend()"), ttlMs);
    const { report } = await extendKeys(this.#engine, o, sorted, keysOf(sorted, o), token, ttlMs, 1);
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
    const o = this.#resolve(options, 10_000, "release()");
    return releaseKeys(this.#engine, o, sorted, keysOf(sorted, o), token, this.#waiting);
  }

  /**
   * Make this client's cluster fingerprint the one its nodes keep for the lock namespace, so that
   * a changed node list (or `clusterName`) is no longer refused. Only once every client of the
   * previous node list has stopped (drained): from then on, clients of the previous list are
   * refused by the nodes this client shares with them. See docs/deployments.md.
   * @returns how many nodes now keep it; run it again until that is every node.
   */
  async resetClusterFingerprint(
    options?: Pick<RedlockOptions, "keyPrefix" | "requestTimeoutMs">,
  ): Promise<ClusterResetResult> {
    return this.cluster.reset(this.#resolve(options, 10_000, "resetClusterFingerprint()"));
  }

  /**
   * Resolves when the background work started so far has finished or been abandoned at its
   * deadline: releases of failed attempts (and their sweeps) and the slow nodes of releases. On
   * Workers, pass it to `ctx.waitUntil()` once the work has started (after a release:
   * `lock.release().then(() => redlock.settled())`) so that it is not cut off. It always ends:
   * each piece of work is bounded (a cleanup by the attempt's TTL, a release by its request
   * deadline), and it waits for them on timers of its own, so that work of another request that
   * has ended (on Workers it never settles) does not hold it up.
   */
  settled(): Promise<SettledResult> {
    return this.#engine.background.settled();
  }

  /**
   * @internal The client's nodes and options, for the optional modules that run operations of
   * their own on them (`initializeFencing`).
   */
  get engine(): Engine {
    return this.#engine;
  }

  /**
   * Inside a `using()` routine that holds one of these resources, an acquisition that waits would
   * wait for itself: refused at once where the runtime can tell (see `nesting.ts`).
   * @throws {InvalidArgumentError}
   */
  #refuseNested(request: AcquireRequest, where: string): void {
    // Outside a using() routine nothing is held: the keys are not scoped for nothing.
    if (!insideUsing()) return;
    const held = heldByCaller(this.#engine.scoped(request.keys));
    if (held === undefined) return;
    throw new InvalidArgumentError(
      `${where} of ${request.resources.join(", ")} inside a using() routine that holds it would wait for itself: use the routine's lock`,
    );
  }

  /** Validate and resolve an acquisition's input; nothing is sent. */
  #request(
    resources: string | readonly string[],
    ttlMs: number,
    options: UsingOptions | undefined,
    where: string,
    extra: readonly string[] = [],
  ): { request: AcquireRequest; signal: AbortSignal | undefined; waitUntil: UsingOptions["waitUntil"] } {
    const sorted = validateResources(resources);
    const { signal, waitUntil, overrides } = callInput(options, where, extra);
    const o = this.#engine.resolveWithTtl(overrides, ttlMs);
    const request = {
      resources: sorted,
      keys: keysOf(sorted, o),
      ttlMs,
      options: o,
      meter: { sent: 0, returned: false },
    };
    return { request, signal, waitUntil };
  }

  #resolve(options: RedlockOptions | undefined, ttlMs: number, where: string): ResolvedOptions {
    return this.#engine.resolve(callOptions(options, where), ttlMs);
  }
}

/** The Redis keys of the (sorted) resources. */
function keysOf(resources: readonly string[], o: ResolvedOptions): string[] {
  return lockKeys(resources, o.keyPrefix);
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
