/**
 * One lock worker of a client process (see `client.ts`): its own Redlock client, and every lock
 * operation it makes reported as history events, stamped on the harness clock.
 *
 * After every grant and extension it audits the nodes (GET + PTTL over TCP, bypassing the fault
 * proxy) for checker 2. Under the lock it increments protected counters on a separate redis
 * (checker 4): read, work, write `read + 1`. A lock of several resources is a claim on each of them
 * (its events list them all), audited key by key.
 * @module
 */
import { Redis } from "ioredis";
import { fencing } from "../../src/fencing/index.js";
import { type Lock, Redlock, restNode } from "../../src/index.js";
import { type Counters, type Read, readCounters, writeCounters } from "./client-counters.js";
import { brokenNode, type GrantMode, PrimitiveTaker } from "./client-primitives.js";
import { attemptsOf, brokenClockFetch, codeOf, type Unstamped, withTimeout } from "./client-support.js";
import { harnessNow } from "./clock.js";
import { type AuditEvent, type AuditedNode, type HistoryEvent, tokenId } from "./history.js";
import type { ClientConfig, DrivenOp, FromClient, StaleToken, Target } from "./protocol.js";
import { createRng, type Rng } from "./rng.js";

const AUDIT_TIMEOUT_MS = 250;

export function send(message: FromClient): void {
  process.send?.(message);
}

/** The cluster a worker locks on: its nodes, and the tag its resources carry in the history. */
export interface WorkerCluster {
  readonly nodes: readonly { readonly url: string; readonly token: string }[];
  readonly redisPorts: readonly number[];
  readonly tag: string;
  readonly nodeOffset: number;
}

/** What a release does besides releasing (see `DrivenOp` "release"). */
export interface ReleaseMisuse {
  readonly repeat?: number | undefined;
  readonly together?: boolean | undefined;
  readonly shareToken?: boolean | undefined;
  /** The release someone else makes (`using()`'s own): the claim ends now, the release is this. */
  readonly by?: (() => Promise<{ released: number } | undefined>) | undefined;
}

/** What a primitive's grant events carry (see `LockEvent.mode`). */
type PrimitiveFields = { mode: GrantMode; permits?: number };

export class Worker {
  readonly id: string;
  readonly config: ClientConfig;
  readonly rng: Rng;
  readonly redlock: Redlock;
  /** Prefix of this worker's resources in the history (its cluster's). */
  readonly tag: string;
  readonly #nodeOffset: number;
  readonly #audit: Redis[];
  readonly #store: Redis;
  readonly #counters: Counters;
  /** Extensions left in flight and by-token operations: `close()` waits for them. */
  readonly #background = new Set<Promise<unknown>>();
  #lock: Lock | undefined;
  #lastRead: Read | undefined;
  #stopping = false;
  #fencingReported = false;
  #releasing: () => void = () => {};
  /** The semaphores or read-write locks the targets name, in a scenario with a primitive. */
  readonly #primitives: PrimitiveTaker | undefined;

  /** The next target of the random workload: drawn at random, or handed out in turn by the process. */
  readonly nextTarget: () => Target;

  constructor(config: ClientConfig, cluster: WorkerCluster, inTurn?: () => Target) {
    this.config = config;
    this.id = config.id;
    this.tag = cluster.tag;
    this.#nodeOffset = cluster.nodeOffset;
    this.rng = createRng(config.seed).fork(config.id);
    this.nextTarget = inTurn ?? (() => this.rng.pick(config.resources));
    const broken = config.brokenClock ? brokenClockFetch() : undefined;
    const nodes = cluster.nodes.map((n, i) => ({
      url: n.url,
      token: n.token,
      ...(config.nodeIds?.[i] === undefined ? {} : { id: config.nodeIds[i] }),
      ...(broken ? { fetch: broken.fetch } : {}),
    }));
    const primitive = config.primitive;
    this.redlock = new Redlock({
      // A negative control's primitive runs the broken design on its nodes.
      nodes: primitive?.broken ? nodes.map((n) => brokenNode(restNode(n), primitive)) : nodes,
      // Each client reaches the nodes through a proxy path of its own: one cluster under other URLs.
      clusterName: `chaos${cluster.tag}`,
      quorum: config.quorum,
      maxAttempts: config.maxAttempts,
      // The harness checks safety and liveness under faults: a node restarted empty costs script
      // fallbacks, a hung one timeouts, and the default budget (40 requests, for the Workers Free
      // plan) would end most waits of the hot key early. What a call costs is checked elsewhere
      // (test/integration/request-budget.test.ts, the bench).
      requestBudget: Infinity,
      retryBaseDelayMs: 50,
      retryMaxDelayMs: 200,
      ...(config.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: config.requestTimeoutMs }),
      ...(broken ? { clock: broken.clock } : {}),
      // Fenced locks: a node found empty is quarantined for a TTL and its drift, and then some.
      ...(config.fencing ? { fencing, quarantineMs: 2 * config.ttlMs } : {}),
    });
    const redisOptions = {
      host: "127.0.0.1",
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      lazyConnect: false,
    };
    this.#audit = cluster.redisPorts.map((port) => new Redis({ ...redisOptions, port }));
    for (const r of this.#audit) r.on("error", () => {});
    this.#store = new Redis({ ...redisOptions, port: config.resourcePort, enableOfflineQueue: true });
    this.#store.on("error", () => {});
    this.#counters = { store: this.#store, fenced: config.fenced, emit: (event) => this.emit(event) };
    this.#primitives = primitive ? new PrimitiveTaker(this.redlock, primitive, this.rng) : undefined;
  }

  get stopping(): boolean {
    return this.#stopping;
  }

  stop(): void {
    this.#stopping = true;
  }

  emit(event: Unstamped): void {
    send({ type: "event", event: { ...event, process: this.id } as HistoryEvent });
  }

  /** The history names of resources: the first (a lock's events are filed under it) and all of them. */
  #names(resources: readonly string[]): { resource: string; resources?: string[] } {
    const all = resources.map((r) => this.tag + r);
    return all.length > 1 ? { resource: all[0] as string, resources: all } : { resource: all[0] as string };
  }

  /** One driven step. */
  async perform(op: DrivenOp): Promise<{ ok: boolean; detail?: string }> {
    switch (op.op) {
      case "acquire":
        return { ok: (await this.acquire(op.resource, op.ttlMs, op.once === true, op.mode)) !== undefined };
      case "extend":
        if (op.inFlight) return { ok: this.extendInFlight(op.ttlMs) };
        return { ok: await this.extend(op.ttlMs) };
      case "read": {
        const read = await this.read();
        this.#lastRead = read;
        return { ok: read.unfenced !== undefined };
      }
      case "write":
        return { ok: await this.write(this.#lastRead ?? {}, op.pauseAfterCheck === true) };
      case "release":
        return { ok: await this.release(op) };
      case "by-token":
        return { ok: await this.byToken(op.f, op.stale, op.ttlMs ?? this.config.ttlMs) };
    }
  }

  /**
   * Records an acquire invoke (`detail`: "using" for `redlock.using()`; `primitive`: the mode of a
   * semaphore's or read-write lock's grant); returns its time.
   */
  invokeAcquire(target: Target, ttlMs: number, detail?: string, primitive?: PrimitiveFields): number {
    const t = harnessNow();
    const names = this.#names([target].flat().sort());
    this.emit({ t, type: "invoke", f: "acquire", ...names, ttl: ttlMs, ...(detail ? { detail } : {}), ...primitive });
    return t;
  }

  failAcquire(target: Target, error: unknown, primitive?: PrimitiveFields): void {
    const detail = attemptsOf(error);
    const code = error === "LOCK_HELD" ? error : codeOf(error);
    const names = { ...this.#names([target].flat().sort()), ...primitive };
    this.emit({ t: harnessNow(), type: "fail", f: "acquire", ...names, error: code, ...(detail ? { detail } : {}) });
  }

  /** Acquires a mutex, or in a scenario with a primitive the one the target names (`mode`: a read-write lock's side). */
  async acquire(target: Target, ttlMs: number, once: boolean, mode?: "read" | "write"): Promise<Lock | undefined> {
    const primitives = this.#primitives;
    const grantMode = primitives?.modeFor(mode);
    const fields = grantMode && primitives?.fields(grantMode);
    const invokedAt = this.invokeAcquire(target, ttlMs, undefined, fields);
    let lock: Lock | null;
    try {
      if (primitives && grantMode) lock = await primitives.take([target].flat()[0] as string, grantMode, ttlMs, once);
      else lock = once ? await this.redlock.tryAcquire(target, ttlMs) : await this.redlock.acquire(target, ttlMs);
    } catch (error) {
      this.failAcquire(target, error, fields);
      return undefined;
    }
    if (!lock) {
      this.failAcquire(target, "LOCK_HELD", fields);
      return undefined;
    }
    return this.granted(lock, invokedAt, ttlMs, fields);
  }

  /**
   * A grant, however it came (acquire, `using()`): recorded, watched, audited. A primitive's grant
   * is not audited: its keys are a slot's or a read-write lock's, which checkers C1–C2 leave out.
   */
  async granted(lock: Lock, invokedAt: number, ttlMs: number, primitive?: PrimitiveFields): Promise<Lock> {
    const t = harnessNow();
    const claimedDeadline = t + lock.remainingMs();
    const lockId = tokenId(lock.token);
    const names = this.#names(lock.resources);
    this.emit({
      t,
      type: "ok",
      f: "acquire",
      ...names,
      lock: lockId,
      claimedDeadline,
      latencyMs: t - invokedAt,
      ttl: ttlMs,
      ...primitive,
    });
    this.#lock = lock;
    send({ type: "holding", worker: this.id, resource: names.resource });
    let releasing = false;
    this.#releasing = () => {
      releasing = true;
    };
    lock.signal.addEventListener(
      "abort",
      () => {
        if (!releasing) this.emit({ t: harnessNow(), type: "info", f: "lost", ...names, lock: lockId });
      },
      { once: true },
    );
    if (!this.#fencingReported) {
      this.#fencingReported = true;
      this.emit({ t, type: "info", f: "fencing", data: { available: lock.fence !== undefined } });
    }
    if (!primitive) await this.audit(lock, "acquire", claimedDeadline);
    return lock;
  }

  async extend(ttlMs: number): Promise<boolean> {
    const lock = this.#lock;
    if (!lock) return false;
    const names = this.#names(lock.resources);
    const lockId = tokenId(lock.token);
    const invokedAt = harnessNow();
    this.emit({ t: invokedAt, type: "invoke", f: "extend", ...names, lock: lockId, ttl: ttlMs });
    try {
      await lock.extend(ttlMs);
    } catch (error) {
      this.emit({ t: harnessNow(), type: "fail", f: "extend", ...names, lock: lockId, error: codeOf(error) });
      // A failed extension may still have re-armed some keys (answers lost, timeouts): if the lock
      // still claims validity, that claim must still be backed by a quorum.
      if (!this.#primitives && !lock.signal.aborted && lock.remainingMs() > 0) {
        const t = harnessNow();
        await this.audit(lock, "extend-failed", t + lock.remainingMs());
      }
      return false;
    }
    const t = harnessNow();
    const claimedDeadline = t + lock.remainingMs();
    this.emit({
      t,
      type: "ok",
      f: "extend",
      ...names,
      lock: lockId,
      claimedDeadline,
      latencyMs: t - invokedAt,
      ttl: ttlMs,
    });
    if (!this.#primitives) await this.audit(lock, "extend", claimedDeadline);
    return true;
  }

  /**
   * Starts an extension and does not wait for it: the release that follows leaves it in flight.
   * Its answer is recorded (a claim it makes before the release counts, cut at the release), never
   * audited: the audit would race the release.
   */
  extendInFlight(ttlMs: number): boolean {
    const lock = this.#lock;
    if (!lock) return false;
    const names = this.#names(lock.resources);
    const lockId = tokenId(lock.token);
    const invokedAt = harnessNow();
    this.emit({ t: invokedAt, type: "invoke", f: "extend", ...names, lock: lockId, ttl: ttlMs, detail: "in flight" });
    this.#track(
      lock.extend(ttlMs).then(
        () => {
          const t = harnessNow();
          const claimedDeadline = t + lock.remainingMs();
          this.emit({ t, type: "ok", f: "extend", ...names, lock: lockId, claimedDeadline, latencyMs: t - invokedAt });
        },
        (error: unknown) =>
          this.emit({ t: harnessNow(), type: "fail", f: "extend", ...names, lock: lockId, error: codeOf(error) }),
      ),
    );
    return true;
  }

  /** GET + PTTL of each of the lock's keys on every node, atomically per node, straight over TCP. */
  async audit(lock: Lock, after: AuditEvent["after"], claimedDeadline: number): Promise<void> {
    const keys = lock.keys;
    const perNode = await Promise.all(
      this.#audit.map(async (redis, index): Promise<AuditedNode[]> => {
        const i = index + this.#nodeOffset;
        const sentAt = harnessNow();
        try {
          const multi = redis.multi();
          for (const key of keys) multi.get(key).pttl(key);
          const result = await withTimeout(multi.exec(), AUDIT_TIMEOUT_MS);
          const receivedAt = harnessNow();
          return keys.map((_, k): AuditedNode => {
            const value = result?.[2 * k]?.[1];
            const pttl = result?.[2 * k + 1]?.[1];
            if (result?.[2 * k]?.[0] || typeof pttl !== "number") return { i, sentAt, receivedAt, holds: null };
            const holds = value === lock.token;
            return holds ? { i, sentAt, receivedAt, holds, pttl } : { i, sentAt, receivedAt, holds };
          });
        } catch {
          return keys.map(() => ({ i, sentAt, receivedAt: harnessNow(), holds: null }));
        }
      }),
    );
    const lockId = tokenId(lock.token);
    lock.resources.forEach((resource, k) => {
      const nodes = perNode.map((answers) => answers[k] as AuditedNode);
      this.emit({
        t: harnessNow(),
        type: "ok",
        f: "audit",
        resource: this.tag + resource,
        lock: lockId,
        after,
        claimedDeadline,
        nodes,
      });
    });
  }

  /** Reads the counters the holder is about to increment (only while the lock is still trusted). */
  read(): Promise<Read> {
    const lock = this.#lock;
    // Counters under exclusive grants only: a mutex, or a fenced write lock (no permit or reader has a fence).
    if (!lock || lock.signal.aborted || (this.#primitives && lock.fence === undefined)) return Promise.resolve({});
    return readCounters(this.#counters, lock, this.#names(lock.resources).resource);
  }

  /** Writes `read + 1` to each counter that was read, if the lock's signal has not aborted. */
  async write(read: Read, pauseAfterCheck = false): Promise<boolean> {
    const lock = this.#lock;
    if (!lock || lock.signal.aborted || read.unfenced === undefined) return false;
    // The check passed; a pause here (GC, a frozen isolate) is what no check can close (S1).
    if (pauseAfterCheck) process.kill(process.pid, "SIGSTOP");
    return writeCounters(this.#counters, lock, this.#names(lock.resources).resource, read);
  }

  /**
   * Releases the lock held; with `misuse`, also calls `release()` again on it (`repeat` times, at
   * once or after it) and shares its token with the harness once the release has answered.
   */
  async release(misuse: ReleaseMisuse = {}): Promise<boolean> {
    const lock = this.#lock;
    if (!lock) return false;
    this.#lock = undefined;
    const names = this.#names(lock.resources);
    const lockId = tokenId(lock.token);
    this.#releasing();
    this.emit({ t: harnessNow(), type: "invoke", f: "release", ...names, lock: lockId });
    const again = async () => {
      this.emit({ t: harnessNow(), type: "invoke", f: "release", ...names, lock: lockId, detail: "again" });
      const result = await lock.release();
      this.emit({
        t: harnessNow(),
        type: "ok",
        f: "release",
        ...names,
        lock: lockId,
        released: result.released,
        detail: "again",
      });
    };
    const repeat = misuse.repeat ?? 0;
    const first = misuse.by ? misuse.by() : lock.release();
    const together = misuse.together ? Array.from({ length: repeat }, again) : [];
    const result = await first;
    this.emit({
      t: harnessNow(),
      type: "ok",
      f: "release",
      ...names,
      lock: lockId,
      ...(result ? { released: result.released } : {}),
    });
    send({ type: "holding", worker: this.id, resource: null });
    if (misuse.shareToken) {
      send({ type: "token", stale: { resources: lock.resources, token: lock.token, from: this.id, tag: this.tag } });
    }
    if (!misuse.together) for (let k = 0; k < repeat; k++) await again();
    await Promise.all(together);
    return (result?.released ?? 0) > 0;
  }

  /**
   * `redlock.release(resources, token)` or `redlock.extend(resources, token, ttlMs)` with a token
   * another worker released (recorded as notes: no claim of ours depends on it).
   */
  async byToken(f: "release" | "extend", stale: StaleToken, ttlMs: number): Promise<boolean> {
    const data = { lock: tokenId(stale.token), from: stale.from, resource: stale.tag + stale.resources[0] };
    this.emit({ t: harnessNow(), type: "info", f: "note", data: { text: `${f} by token`, ...data, ttlMs } });
    let outcome: Record<string, unknown>;
    try {
      if (f === "release") {
        const result = await this.redlock.release(stale.resources, stale.token);
        outcome = { ok: result.released > 0, released: result.released };
      } else {
        await this.redlock.extend(stale.resources, stale.token, ttlMs);
        outcome = { ok: true };
      }
    } catch (error) {
      outcome = { ok: false, error: codeOf(error) };
    }
    this.emit({
      t: harnessNow(),
      type: "info",
      f: "note",
      data: { text: `${f} by token answered`, ...data, ...outcome },
    });
    return outcome.ok === true;
  }

  /** Runs `work` in the background until `close()`. */
  #track(work: Promise<unknown>): void {
    this.#background.add(work);
    void work.finally(() => this.#background.delete(work));
  }

  /** A by-token operation to make in the background (see {@link byToken}). */
  misuseLater(work: () => Promise<unknown>): void {
    this.#track(work().catch(() => undefined));
  }

  async close(): Promise<void> {
    if (this.#lock) await this.release();
    await Promise.all([...this.#background]);
    await this.redlock.settled();
    for (const r of [...this.#audit, this.#store]) r.disconnect();
  }
}
