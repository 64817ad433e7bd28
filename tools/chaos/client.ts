/**
 * Entry point of one client process of the chaos harness (bundled with the library under test by
 * `build.ts`). It runs a lock workload, random or driven step by step by the harness, and reports
 * every operation as history events over IPC, stamped on the harness clock.
 *
 * After every grant and extension it audits the nodes (GET + PTTL over TCP, bypassing the fault
 * proxy) for checker 2. Under the lock it increments protected counters on a separate redis
 * (checker 4): read, work, write `read + 1`.
 * @module
 */
import { Redis } from "ioredis";
import { type AttemptReport, type Lock, Redlock } from "../../src/index.js";
import { harnessNow } from "./clock.js";
import { type AuditEvent, type AuditedNode, type HistoryEvent, tokenId } from "./history.js";
import type { ClientConfig, DrivenOp, FromClient, ToClient } from "./protocol.js";
import { createRng, type Rng } from "./rng.js";

const AUDIT_TIMEOUT_MS = 250;

/** Unfenced write: set the counter, return what it replaced. */
const WRITE_UNFENCED = `local prev = redis.call("GET", KEYS[1])
redis.call("SET", KEYS[1], ARGV[1])
return tonumber(prev or "0")`;

/**
 * Fenced access (read when ARGV[2] is empty, else write ARGV[2]): refused unless the token is at
 * least the largest seen, which it then becomes, all in one atomic step.
 */
const FENCED_ACCESS = `local max = tonumber(redis.call("GET", KEYS[2]) or "-1")
local token = tonumber(ARGV[1])
if token < max then return {0, 0} end
redis.call("SET", KEYS[2], ARGV[1])
local prev = tonumber(redis.call("GET", KEYS[1]) or "0")
if ARGV[2] ~= "" then redis.call("SET", KEYS[1], ARGV[2]) end
return {1, prev}`;

function send(message: FromClient): void {
  process.send?.(message);
}

/** A history event before the client stamps its id on it. */
type Unstamped = HistoryEvent extends infer E ? (E extends HistoryEvent ? Omit<E, "process"> : never) : never;

function emit(event: Unstamped, id: string): void {
  send({ type: "event", event: { ...event, process: id } as HistoryEvent });
}

/** A clock that stands still while any request to a node is in flight (negative control). */
function brokenClockFetch(): { clock: { now(): number }; fetch: typeof fetch } {
  let inFlight = 0;
  let since = 0;
  let lost = 0;
  const now = () => performance.now() - lost - (inFlight > 0 ? performance.now() - since : 0);
  const countingFetch: typeof fetch = async (input, init) => {
    if (inFlight++ === 0) since = performance.now();
    try {
      return await globalThis.fetch(input, init);
    } finally {
      if (--inFlight === 0) lost += performance.now() - since;
    }
  };
  return { clock: { now }, fetch: countingFetch };
}

class Client {
  readonly #config: ClientConfig;
  readonly #rng: Rng;
  readonly #redlock: Redlock;
  readonly #audit: Redis[];
  readonly #store: Redis;
  #lock: Lock | undefined;
  #stopping = false;
  #fencingReported = false;

  constructor(config: ClientConfig) {
    this.#config = config;
    this.#rng = createRng(config.seed).fork(config.id);
    const broken = config.brokenClock ? brokenClockFetch() : undefined;
    this.#redlock = new Redlock({
      nodes: config.nodes.map((n) => ({ url: n.url, token: n.token, ...(broken ? { fetch: broken.fetch } : {}) })),
      // Each client reaches the nodes through a proxy path of its own: one cluster under other URLs.
      clusterName: "chaos",
      quorum: config.quorum,
      maxAttempts: config.maxAttempts,
      retryBaseDelayMs: 50,
      retryMaxDelayMs: 200,
      ...(config.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: config.requestTimeoutMs }),
      ...(broken ? { clock: broken.clock } : {}),
      // Fenced locks: a node found empty is quarantined for a TTL and its drift, and then some.
      ...(config.fencing ? { fencing: true, quarantineMs: 2 * config.ttlMs } : {}),
    });
    const redisOptions = {
      host: "127.0.0.1",
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      lazyConnect: false,
    };
    this.#audit = config.redisPorts.map((port) => new Redis({ ...redisOptions, port }));
    for (const r of this.#audit) r.on("error", () => {});
    this.#store = new Redis({ ...redisOptions, port: config.resourcePort, enableOfflineQueue: true });
    this.#store.on("error", () => {});
  }

  stop(): void {
    this.#stopping = true;
  }

  /** The random workload, until the harness clock passes `untilMs` or stop() is called. */
  async run(untilMs: number): Promise<void> {
    const { resources, ttlMs } = this.#config;
    while (!this.#stopping && harnessNow() < untilMs) {
      const resource = this.#rng.pick(resources);
      const lock = await this.acquire(resource, ttlMs, false);
      if (lock) {
        const read = await this.read();
        if (this.#config.workMs > 0) await sleep(this.#rng.int(0, this.#config.workMs));
        // Extensions never shorten the lease (as `using()` extends: the full TTL, before expiry).
        // A shortening extension that fails is an open finding with its own scenario
        // (lost-extension); here it would only make the safe runs fail at random.
        if (this.#rng.next() < this.#config.extendProbability) {
          await this.extend(this.#rng.int(ttlMs, 2 * ttlMs));
        }
        await this.write(read);
        await this.release();
      }
      await sleep(this.#rng.int(0, this.#config.thinkMs));
    }
  }

  /** One driven step. */
  async perform(op: DrivenOp): Promise<{ ok: boolean; detail?: string }> {
    switch (op.op) {
      case "acquire":
        return { ok: (await this.acquire(op.resource, op.ttlMs, op.once === true)) !== undefined };
      case "extend":
        return { ok: await this.extend(op.ttlMs) };
      case "read": {
        const read = await this.read();
        this.#lastRead = read;
        return { ok: read.unfenced !== undefined };
      }
      case "write":
        return { ok: await this.write(this.#lastRead ?? {}, op.pauseAfterCheck === true) };
      case "release":
        return { ok: await this.release() };
    }
  }

  #lastRead: { unfenced?: number; fenced?: number } | undefined;

  async acquire(resource: string, ttlMs: number, once: boolean): Promise<Lock | undefined> {
    const id = this.#config.id;
    const invokedAt = harnessNow();
    emit({ t: invokedAt, type: "invoke", f: "acquire", resource, ttl: ttlMs }, id);
    let lock: Lock | null;
    try {
      lock = once ? await this.#redlock.tryAcquire(resource, ttlMs) : await this.#redlock.acquire(resource, ttlMs);
    } catch (error) {
      const detail = attemptsOf(error);
      emit(
        { t: harnessNow(), type: "fail", f: "acquire", resource, error: codeOf(error), ...(detail ? { detail } : {}) },
        id,
      );
      return undefined;
    }
    if (!lock) {
      emit({ t: harnessNow(), type: "fail", f: "acquire", resource, error: "LOCK_HELD" }, id);
      return undefined;
    }
    const t = harnessNow();
    const claimedDeadline = t + lock.remainingMs();
    const lockId = tokenId(lock.token);
    emit(
      { t, type: "ok", f: "acquire", resource, lock: lockId, claimedDeadline, latencyMs: t - invokedAt, ttl: ttlMs },
      id,
    );
    this.#lock = lock;
    send({ type: "holding", worker: id, resource });
    const held = lock;
    let releasing = false;
    this.#releasing = () => {
      releasing = true;
    };
    held.signal.addEventListener(
      "abort",
      () => {
        if (!releasing) emit({ t: harnessNow(), type: "info", f: "lost", resource, lock: lockId }, id);
      },
      { once: true },
    );
    if (!this.#fencingReported) {
      this.#fencingReported = true;
      emit({ t, type: "info", f: "fencing", data: { available: held.fence !== undefined } }, id);
    }
    await this.audit(held, "acquire", claimedDeadline);
    return held;
  }

  #releasing: () => void = () => {};

  async extend(ttlMs: number): Promise<boolean> {
    const lock = this.#lock;
    if (!lock) return false;
    const id = this.#config.id;
    const [resource] = lock.resources as [string];
    const lockId = tokenId(lock.token);
    const invokedAt = harnessNow();
    emit({ t: invokedAt, type: "invoke", f: "extend", resource, lock: lockId, ttl: ttlMs }, id);
    try {
      await lock.extend(ttlMs);
    } catch (error) {
      emit({ t: harnessNow(), type: "fail", f: "extend", resource, lock: lockId, error: codeOf(error) }, id);
      // A failed extension may still have re-armed some keys (answers lost, timeouts): if the lock
      // still claims validity, that claim must still be backed by a quorum.
      if (!lock.signal.aborted && lock.remainingMs() > 0) {
        const t = harnessNow();
        await this.audit(lock, "extend-failed", t + lock.remainingMs());
      }
      return false;
    }
    const t = harnessNow();
    const claimedDeadline = t + lock.remainingMs();
    emit(
      { t, type: "ok", f: "extend", resource, lock: lockId, claimedDeadline, latencyMs: t - invokedAt, ttl: ttlMs },
      id,
    );
    await this.audit(lock, "extend", claimedDeadline);
    return true;
  }

  /** GET + PTTL of the lock's key on every node, atomically per node, straight over TCP. */
  async audit(lock: Lock, after: AuditEvent["after"], claimedDeadline: number): Promise<void> {
    const [key] = lock.keys as [string];
    const [resource] = lock.resources as [string];
    const nodes = await Promise.all(
      this.#audit.map(async (redis, i): Promise<AuditedNode> => {
        const sentAt = harnessNow();
        try {
          const result = await withTimeout(redis.multi().get(key).pttl(key).exec(), AUDIT_TIMEOUT_MS);
          const receivedAt = harnessNow();
          const value = result?.[0]?.[1];
          const pttl = result?.[1]?.[1];
          if (result?.[0]?.[0] || typeof pttl !== "number") return { i, sentAt, receivedAt, holds: null };
          const holds = value === lock.token;
          return holds ? { i, sentAt, receivedAt, holds, pttl } : { i, sentAt, receivedAt, holds };
        } catch {
          return { i, sentAt, receivedAt: harnessNow(), holds: null };
        }
      }),
    );
    emit(
      { t: harnessNow(), type: "ok", f: "audit", resource, lock: tokenId(lock.token), after, claimedDeadline, nodes },
      this.#config.id,
    );
  }

  /** Reads the counters the holder is about to increment (only while the lock is still trusted). */
  async read(): Promise<{ unfenced?: number; fenced?: number }> {
    const lock = this.#lock;
    if (!lock || lock.signal.aborted) return {};
    const [resource] = lock.resources as [string];
    const lockId = tokenId(lock.token);
    const out: { unfenced?: number; fenced?: number } = {};
    try {
      out.unfenced = Number((await this.#store.get(`counter:unfenced:${resource}`)) ?? 0);
      emit(
        { t: harnessNow(), type: "ok", f: "read", resource, lock: lockId, variant: "unfenced", read: out.unfenced },
        this.#config.id,
      );
    } catch (error) {
      emit(
        { t: harnessNow(), type: "fail", f: "read", resource, lock: lockId, variant: "unfenced", error: codeOf(error) },
        this.#config.id,
      );
    }
    const fence = fenceOf(lock);
    if (this.#config.fenced && fence !== undefined) {
      const reply = (await this.#store.eval(
        FENCED_ACCESS,
        2,
        `counter:fenced:${resource}`,
        `fence:${resource}`,
        fence,
        "",
      )) as [number, number];
      const accepted = reply[0] === 1;
      if (accepted) out.fenced = reply[1];
      emit(
        { t: harnessNow(), type: "ok", f: "read", resource, lock: lockId, variant: "fenced", accepted, read: reply[1] },
        this.#config.id,
      );
    }
    return out;
  }

  /** Writes `read + 1` to each counter that was read, if the lock's signal has not aborted. */
  async write(read: { unfenced?: number; fenced?: number }, pauseAfterCheck = false): Promise<boolean> {
    const lock = this.#lock;
    if (!lock || lock.signal.aborted || read.unfenced === undefined) return false;
    // The check passed; a pause here (GC, a frozen isolate) is what no check can close (S1).
    if (pauseAfterCheck) process.kill(process.pid, "SIGSTOP");
    const [resource] = lock.resources as [string];
    const lockId = tokenId(lock.token);
    const value = read.unfenced + 1;
    try {
      const prev = Number(await this.#store.eval(WRITE_UNFENCED, 1, `counter:unfenced:${resource}`, value));
      emit(
        {
          t: harnessNow(),
          type: "ok",
          f: "write",
          resource,
          lock: lockId,
          variant: "unfenced",
          read: read.unfenced,
          value,
          prev,
        },
        this.#config.id,
      );
    } catch (error) {
      emit(
        {
          t: harnessNow(),
          type: "fail",
          f: "write",
          resource,
          lock: lockId,
          variant: "unfenced",
          error: codeOf(error),
        },
        this.#config.id,
      );
      return false;
    }
    const fence = fenceOf(lock);
    if (this.#config.fenced && fence !== undefined && read.fenced !== undefined) {
      const reply = (await this.#store.eval(
        FENCED_ACCESS,
        2,
        `counter:fenced:${resource}`,
        `fence:${resource}`,
        fence,
        String(read.fenced + 1),
      )) as [number, number];
      const accepted = reply[0] === 1;
      emit(
        {
          t: harnessNow(),
          type: "ok",
          f: "write",
          resource,
          lock: lockId,
          variant: "fenced",
          accepted,
          read: read.fenced,
          value: read.fenced + 1,
          ...(accepted ? { prev: reply[1] } : {}),
        },
        this.#config.id,
      );
    }
    return true;
  }

  async release(): Promise<boolean> {
    const lock = this.#lock;
    if (!lock) return false;
    this.#lock = undefined;
    const [resource] = lock.resources as [string];
    const lockId = tokenId(lock.token);
    this.#releasing();
    emit({ t: harnessNow(), type: "invoke", f: "release", resource, lock: lockId }, this.#config.id);
    const result = await lock.release();
    emit(
      { t: harnessNow(), type: "ok", f: "release", resource, lock: lockId, released: result.released },
      this.#config.id,
    );
    send({ type: "holding", worker: this.#config.id, resource: null });
    return result.released > 0;
  }

  async close(): Promise<void> {
    if (this.#lock) await this.release();
    await this.#redlock.settled();
    for (const r of [...this.#audit, this.#store]) r.disconnect();
  }
}

/** The fencing token as a decimal string, when the library provides one. */
function fenceOf(lock: Lock): string | undefined {
  const fence = (lock as { fence?: unknown }).fence;
  if (typeof fence === "number" || typeof fence === "bigint") return String(fence);
  if (typeof fence === "string" && /^\d+$/.test(fence)) return fence;
  return undefined;
}

/**
 * What a failed acquire tried, from the error's attempt reports: its fan-outs and the last one's
 * outcome per node (no tokens). Without it a history shows that waiters gave up, not whether they
 * gave up in line (one fan-out, then polls of the gate, which no report counts after the last
 * fan-out) or after falling back to fan-outs.
 */
function attemptsOf(error: unknown): string | undefined {
  const attempts = (error as { attempts?: readonly AttemptReport[] } | null)?.attempts;
  const last = attempts?.at(-1);
  if (!attempts || !last) return undefined;
  return `${attempts.length} fan-outs; last: ${last.nodes.map((n) => n.outcome).join(" ")}`;
}

function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : (error as Error)?.name || "Error";
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("audit timeout")), ms);
    }),
  ]);
}

/** Busy-waits: the event loop is starved, as under CPU contention. */
function stall(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // spin
  }
}

function main(): void {
  // Worker 0 also takes the driven steps; every worker runs the random workload.
  let workers: Client[] = [];
  let work: Promise<unknown> = Promise.resolve();
  process.on("message", (message: ToClient) => {
    switch (message.type) {
      case "init": {
        const { config } = message;
        const count = Math.max(1, config.workers ?? 1);
        workers = Array.from(
          { length: count },
          (_, j) => new Client({ ...config, id: count === 1 ? config.id : `${config.id}.${j}` }),
        );
        send({ type: "ready" });
        break;
      }
      case "ping":
        send({ type: "pong", id: message.id, t: harnessNow() });
        break;
      case "run":
        work = Promise.all(workers.map((w) => w.run(message.untilMs)));
        break;
      case "do":
        work = work.then(async () => {
          try {
            const result = (await workers[0]?.perform(message.op)) ?? { ok: false, detail: "not initialised" };
            send({ type: "done", id: message.id, ...result });
          } catch (error) {
            send({ type: "done", id: message.id, ok: false, detail: codeOf(error) });
          }
        });
        break;
      case "stall":
        stall(message.ms);
        break;
      case "stop":
        for (const w of workers) w.stop();
        void work
          .then(() => Promise.all(workers.map((w) => w.close())))
          .finally(() => {
            send({ type: "stopped" });
            process.disconnect?.();
            setTimeout(() => process.exit(0), 50).unref();
          });
        break;
    }
  });
  process.on("disconnect", () => setTimeout(() => process.exit(0), 200).unref());
}

main();
