/**
 * The lock systems under test behind one small interface: edge-redlock and what users would pick
 * instead. Each client instance is independent (its own Redlock / Redis clients / connections),
 * as separate application instances would be. Attempts are counted on the client by wrapping each
 * library's per-attempt step; requests are counted on the servers (see node-host.ts).
 */

import { Redlock as SesameRedlock } from "@sesamecare-oss/redlock";
import { Lock as UpstashLock } from "@upstash/lock";
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { createRedlock, IoredisAdapter } from "redlock-universal";
import { type Lock, Redlock, type RedlockOptions } from "../../src/index.js";
import { type MemoryStore, memoryIoredis, memoryRedisNode } from "./memory-store.js";
import type { HostNode } from "./node-host-protocol.js";

export type SystemId = "edge-redlock" | "upstash-lock" | "sesame-redlock" | "redlock-universal" | "no-lock";
/**
 * "equal": 10 attempts, a fixed 100 ms apart, for every system. "defaults": each system's own.
 * "retryDelay" (edge-redlock only): the same 10 attempts 100 ms apart through a custom
 * `retryDelay`, as a user migrating from node-redlock writes it.
 */
export type Policy = "equal" | "defaults" | "retryDelay";

/** A system, its retry policy and how many nodes it locks on (serialisable: sent to worker processes). */
export interface SystemSpec {
  id: SystemId;
  policy: Policy;
  /** Nodes used (ignored by single-node systems). */
  n: number;
}

/** What a system is, for the results. */
export interface SystemInfo {
  label: string;
  version: string;
  transport: "REST" | "TCP" | "none";
  /** Nodes it locks on, given the N of the run. */
  nodesUsed: (n: number) => number;
  defaults: string;
  equal: string;
}

export const EQUAL_POLICY = { attempts: 10, delayMs: 100 } as const;

/**
 * edge-redlock under the equal policy: the same budget as the peers' (attempts about delayMs
 * apart), through the backoff settings; a custom retryDelay would replace its waiting in line
 * with plain retries.
 */
export const EDGE_REDLOCK_EQUAL: RedlockOptions = Object.freeze({
  maxAttempts: EQUAL_POLICY.attempts,
  retryBaseDelayMs: EQUAL_POLICY.delayMs,
  retryMaxDelayMs: EQUAL_POLICY.delayMs,
});

/** edge-redlock with a custom `retryDelay`: a fixed 100 ms between at most 10 attempts. */
export const EDGE_REDLOCK_RETRY_DELAY: RedlockOptions = Object.freeze({
  maxAttempts: EQUAL_POLICY.attempts,
  retryDelay: () => EQUAL_POLICY.delayMs,
});

export const SYSTEMS: Record<SystemId, SystemInfo> = {
  "edge-redlock": {
    label: "edge-redlock",
    version: "this checkout (src/)",
    transport: "REST",
    nodesUsed: (n) => n,
    defaults:
      "fetch to each node (one POST per command), SET NX PX to all N at once, settles at quorum, per-request timeout min(1000, max(50, ttl/10)) ms, 10 attempts, full-jitter backoff base 100 ms cap 2000 ms, cleanup of a failed attempt in the background",
    equal:
      "maxAttempts 10, retryBaseDelayMs = retryMaxDelayMs = 100 (fan-outs when nodes fail; polls of the gate while waiting are not attempts)",
  },
  "upstash-lock": {
    label: "@upstash/lock",
    version: "0.2.1",
    transport: "REST",
    nodesUsed: () => 1,
    defaults:
      "one node through @upstash/redis 1.39.0 (auto-pipelining on, base64 responses, 5 network retries); SET NX PX, 3 attempts 100 ms apart (it also sleeps after the last one), release by EVAL",
    equal: "retry { attempts: 10, delay: 100 }",
  },
  "sesame-redlock": {
    label: "@sesamecare-oss/redlock",
    version: "1.4.0",
    transport: "TCP",
    nodesUsed: (n) => n,
    defaults:
      "ioredis 6.0.0 per node (TCP), EVALSHA of its acquire script to all N, settles at quorum (for or against), retryCount 10 (11 attempts), retryDelay 200 ± 100 ms jitter, no per-request timeout",
    equal: "retryCount 9, retryDelay 100, retryJitter 0",
  },
  "redlock-universal": {
    label: "redlock-universal",
    version: "0.8.5",
    transport: "TCP",
    nodesUsed: (n) => n,
    defaults:
      "IoredisAdapter over ioredis 6.0.0 per node (TCP), SET NX PX to all N and waits for every node (allSettled), retryAttempts 3 (4 attempts), retryDelay 200 ms, 5000 ms command timeout, releases partial locks before retrying",
    equal: "retryAttempts 9, retryDelay 100",
  },
  "no-lock": {
    label: "no lock (negative control)",
    version: "–",
    transport: "none",
    nodesUsed: () => 0,
    defaults: "acquire returns at once without locking; the correctness checks must catch it",
    equal: "–",
  },
};

/** Display name of a spec, e.g. "edge-redlock (equal)". */
export function specLabel(spec: SystemSpec): string {
  return spec.id === "no-lock" ? SYSTEMS[spec.id].label : `${SYSTEMS[spec.id].label} (${spec.policy})`;
}

/** One client instance of a system. */
export interface LockClient {
  /** A handle, or null when the system gave up after its retries. */
  acquire(key: string, ttlMs: number): Promise<unknown | null>;
  release(handle: unknown): Promise<void>;
  /** Acquire attempts made so far (each a round of requests to the nodes). */
  attempts(): number;
  /**
   * The acquire() calls that gave up so far, by the reason the system names (edge-redlock: the
   * error's `code`); absent for systems that give up for one reason only (their retries ran out).
   */
  giveUps?(): Record<string, number>;
  close(): Promise<void>;
}

/** Where a client's nodes are: the node host's real servers, or in-memory stores (CPU part). */
export type Backend =
  | { kind: "servers"; nodes: readonly HostNode[] }
  | { kind: "memory"; stores: readonly MemoryStore[] };

/** Creates one connected client instance of `spec`. */
export async function createClient(spec: SystemSpec, backend: Backend): Promise<LockClient> {
  switch (spec.id) {
    case "edge-redlock":
      return edgeRedlock(spec, backend);
    case "upstash-lock":
      return upstashLock(spec, backend);
    case "sesame-redlock":
      return sesameRedlock(spec, await ioredisClients(spec.n, backend));
    case "redlock-universal":
      return redlockUniversal(spec, await ioredisClients(spec.n, backend));
    case "no-lock":
      return { acquire: async () => ({}), release: async () => {}, attempts: () => 0, close: async () => {} };
  }
}

function edgeRedlock(spec: SystemSpec, backend: Backend): LockClient {
  let attempts = 0;
  const policy: RedlockOptions =
    spec.policy === "equal" ? EDGE_REDLOCK_EQUAL : spec.policy === "retryDelay" ? EDGE_REDLOCK_RETRY_DELAY : {};
  const nodes =
    backend.kind === "servers"
      ? backend.nodes.slice(0, spec.n).map(({ url, token }) => ({ url, token }))
      : backend.stores.slice(0, spec.n).map((store, i) => memoryRedisNode(store, `memory-${i}`));
  const redlock = new Redlock({
    nodes,
    // Each node count is a cluster of its own over the same servers: its own lock namespace, so
    // the nodes' cluster fingerprints keep them apart instead of refusing the second count.
    keyPrefix: `n${spec.n}:`,
    ...policy,
    onAttempt: (report) => {
      if (report.operation === "acquire") attempts++;
    },
  });
  const giveUps: Record<string, number> = {};
  return {
    async acquire(key, ttlMs) {
      try {
        return await redlock.acquire(key, ttlMs);
      } catch (error) {
        if (!isGiveUp(error)) throw error;
        const code = (error as { code: string }).code;
        giveUps[code] = (giveUps[code] ?? 0) + 1;
        return null;
      }
    },
    async release(handle) {
      await (handle as Lock).release();
    },
    attempts: () => attempts,
    giveUps: () => ({ ...giveUps }),
    close: async () => {
      await redlock.settled();
    },
  };
}

/**
 * edge-redlock's errors for "gave up": held elsewhere through every attempt, out of time, no
 * quorum answered, the request budget spent, or the nodes rate-limited the call.
 */
export function isGiveUp(error: unknown): boolean {
  const code = (error as { code?: string })?.code;
  return (
    code === "LOCK_HELD" ||
    code === "ACQUIRE_TIMEOUT" ||
    code === "VALIDITY_EXHAUSTED" ||
    code === "QUORUM_UNAVAILABLE" ||
    code === "REQUEST_BUDGET" ||
    code === "RATE_LIMITED"
  );
}

function upstashLock(spec: SystemSpec, backend: Backend): LockClient {
  let attempts = 0;
  const endpoint =
    backend.kind === "servers"
      ? { url: backend.nodes[0]!.url, token: backend.nodes[0]!.token }
      : { url: "http://memory-0", token: "memory" };
  const redis = new UpstashRedis({ ...endpoint, enableTelemetry: false });
  // Count attempts: every SET of @upstash/lock is one attempt.
  const counted = new Proxy(redis, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property === "set" && typeof value === "function") {
        return (...args: unknown[]) => {
          attempts++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const retry = spec.policy === "equal" ? { attempts: EQUAL_POLICY.attempts, delay: EQUAL_POLICY.delayMs } : undefined;
  return {
    async acquire(key, ttlMs) {
      const lock = new UpstashLock({ id: key, redis: counted, lease: ttlMs, ...(retry ? { retry } : {}) });
      return (await lock.acquire()) ? lock : null;
    },
    async release(handle) {
      await (handle as UpstashLock).release();
    },
    attempts: () => attempts,
    close: async () => {},
  };
}

type IoredisLike = IORedis;

/** One ioredis client per node (through its delaying TCP proxy), or in-memory stand-ins. */
export async function ioredisClients(
  n: number,
  backend: Backend,
): Promise<{ clients: IoredisLike[]; close: () => Promise<void> }> {
  if (backend.kind === "memory") {
    const clients = backend.stores.slice(0, n).map((store) => memoryIoredis(store) as unknown as IoredisLike);
    return { clients, close: async () => {} };
  }
  const clients = backend.nodes.slice(0, n).map((node) => new IORedis({ host: "127.0.0.1", port: node.tcpPort }));
  for (const client of clients) client.on("error", () => {});
  await Promise.all(clients.map((client) => client.ping()));
  return {
    clients,
    close: async () => {
      for (const client of clients) client.disconnect();
    },
  };
}

function sesameRedlock(
  spec: SystemSpec,
  { clients, close }: { clients: IoredisLike[]; close: () => Promise<void> },
): LockClient {
  let attempts = 0;
  const redlock = new SesameRedlock(
    clients,
    spec.policy === "equal"
      ? { retryCount: EQUAL_POLICY.attempts - 1, retryDelay: EQUAL_POLICY.delayMs, retryJitter: 0 }
      : {},
  );
  // Count attempts: wrap its per-attempt step (acquire rounds only).
  const instance = redlock as unknown as {
    _attemptOperation: (script: string, ...rest: unknown[]) => Promise<unknown>;
  };
  const attempt = instance._attemptOperation.bind(redlock);
  instance._attemptOperation = (script, ...rest) => {
    if (script === "acquireLock") attempts++;
    return attempt(script, ...rest);
  };
  return {
    async acquire(key, ttlMs) {
      try {
        return await redlock.acquire([key], ttlMs);
      } catch (error) {
        if ((error as Error).name === "ExecutionError") return null;
        throw error;
      }
    },
    async release(handle) {
      await redlock.release(handle as Parameters<SesameRedlock["release"]>[0]).catch(() => {});
    },
    attempts: () => attempts,
    close,
  };
}

function redlockUniversal(
  spec: SystemSpec,
  { clients, close }: { clients: IoredisLike[]; close: () => Promise<void> },
): LockClient {
  let attempts = 0;
  const adapters = clients.map((client) => new IoredisAdapter(client));
  const locks = new Map<string, ReturnType<typeof createRedlock>>();
  const lockFor = (key: string, ttl: number) => {
    const id = `${key}\u0000${ttl}`;
    let lock = locks.get(id);
    if (!lock) {
      lock = createRedlock({
        adapters,
        key,
        ttl,
        ...(spec.policy === "equal"
          ? { retryAttempts: EQUAL_POLICY.attempts - 1, retryDelay: EQUAL_POLICY.delayMs }
          : {}),
      });
      // Count attempts: wrap its per-attempt step.
      const instance = lock as unknown as { attemptLockAcquisition: (...a: unknown[]) => Promise<unknown> };
      const step = instance.attemptLockAcquisition.bind(lock);
      instance.attemptLockAcquisition = (...a) => {
        attempts++;
        return step(...a);
      };
      locks.set(id, lock);
    }
    return lock;
  };
  const owner = new WeakMap<object, ReturnType<typeof createRedlock>>();
  return {
    async acquire(key, ttlMs) {
      const lock = lockFor(key, ttlMs);
      try {
        const handle = await lock.acquire();
        owner.set(handle, lock);
        return handle;
      } catch (error) {
        if ((error as { code?: string }).code === "LOCK_ACQUISITION_FAILED") return null;
        throw error;
      }
    },
    async release(handle) {
      await owner.get(handle as object)?.release(handle as Parameters<ReturnType<typeof createRedlock>["release"]>[0]);
    },
    attempts: () => attempts,
    close,
  };
}
