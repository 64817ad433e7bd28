/**
 * The semaphores the semaphore part compares, behind one small interface: edge-redlock's
 * `Semaphore` (k slots, each a Redlock mutex, over REST), and redis-semaphore's `Semaphore` (one
 * node) and `RedlockSemaphore` (a count of holders per node, admitted where the count is below k
 * on a majority), over ioredis TCP. Each client is one application instance: its own Redlock or
 * its own ioredis connections. Requests are counted on the client, by the client's own transport:
 * every `fetch` of edge-redlock's nodes, every command ioredis writes.
 */
import { Redis as IORedis } from "ioredis";
import { Semaphore as CountingSemaphore, RedlockSemaphore } from "redis-semaphore";
import { type Lock, Redlock, type RedlockOptions, Semaphore } from "../../../src/index.js";
import { isGiveUp } from "../systems.js";

/** The semaphores compared: edge-redlock with its defaults and with redis-semaphore's waiting, and redis-semaphore's two. */
export type SemaphoreSubjectId = "edge-redlock" | "edge-redlock-10ms" | "redis-semaphore" | "redlock-semaphore";

/**
 * edge-redlock waiting as redis-semaphore does by default: a fixed 10 ms between rounds for up to
 * 10 s, with no request budget (redis-semaphore has none).
 */
const REDIS_SEMAPHORE_WAITING: RedlockOptions = Object.freeze({
  retryDelay: () => 10,
  acquireTimeoutMs: 10_000,
  requestBudget: Number.POSITIVE_INFINITY,
});

/** What the part reports about a subject. */
export interface SemaphoreSubjectInfo {
  label: string;
  transport: "REST" | "TCP";
  /** The nodes it uses, out of the N given. */
  nodes: (n: number) => number;
  /** Its waiting, as configured here (every subject runs with its library's defaults). */
  waiting: string;
}

/** What each subject is, for the part's method lines and tables. */
export const SEMAPHORE_SUBJECTS: Record<SemaphoreSubjectId, SemaphoreSubjectInfo> = {
  "edge-redlock": {
    label: "edge-redlock Semaphore",
    transport: "REST",
    nodes: (n) => n,
    waiting:
      "defaults: a fan-out on a random slot; when it is held, a place in the semaphore's line on a gate node (first come, first served): one request per poll, timed by the holds the gate has seen, at most 10 polls in any second, then a fan-out on the free slot at its place in line; requestBudget 40",
  },
  "edge-redlock-10ms": {
    label: "edge-redlock Semaphore (10 ms retries)",
    transport: "REST",
    nodes: (n) => n,
    waiting:
      "redis-semaphore's settings: `retryDelay: () => 10`, `acquireTimeoutMs: 10_000`, `requestBudget: Infinity`; it waits in the line as the defaults do (`retryDelay` paces fan-outs while nodes fail, not the polls of the line)",
  },
  "redis-semaphore": {
    label: "redis-semaphore Semaphore",
    transport: "TCP",
    nodes: () => 1,
    waiting: "defaults: one EVALSHA per attempt on node 1, retryInterval 10 ms, acquireTimeout 10 s",
  },
  "redlock-semaphore": {
    label: "redis-semaphore RedlockSemaphore",
    transport: "TCP",
    nodes: (n) => n,
    waiting:
      "defaults: one EVALSHA per node per attempt, waits for every node, ZREM on every node after a failed attempt, retryInterval 10 ms, acquireTimeout 10 s",
  },
};

/** A permit held; `release` gives it back. */
export interface Permit {
  release(): Promise<void>;
}

/** One semaphore as a client sees it. */
export interface PermitSource {
  /** A permit, or null when the library gave up (every permit stayed held) or `signal` aborted. */
  acquire(signal?: AbortSignal): Promise<Permit | null>;
}

/** One client instance of a subject. */
export interface SemaphoreClient {
  semaphore(name: string, permits: number): PermitSource;
  close(): Promise<void>;
}

/** How a client reaches node i: its REST endpoint (with an optional `fetch`) and a TCP port. */
export interface NodeRoute {
  url: string;
  token: string;
  /** The `fetch` requests to this node go through before being counted. @default globalThis.fetch */
  fetch?: typeof fetch;
  tcpPort: number;
}

/** Requests a set of clients sent, counted as they are sent. */
export interface RequestCounter {
  sent: number;
}

/** How a client acquires. */
export interface ClientOptions {
  /** One try, never a pause: edge-redlock's `tryAcquire()`, redis-semaphore's `acquireAttemptsLimit: 1`. @default false */
  singleTry?: boolean;
  /** The lease (edge-redlock's TTL, redis-semaphore's `lockTimeout`). @default 10_000 */
  ttlMs?: number;
}

/** Creates one connected client of `id` over `routes` (one per node), counting into `counter`. */
export async function createSemaphoreClient(
  id: SemaphoreSubjectId,
  routes: readonly NodeRoute[],
  counter: RequestCounter,
  options: ClientOptions = {},
): Promise<SemaphoreClient> {
  const ttlMs = options.ttlMs ?? 10_000;
  const singleTry = options.singleTry ?? false;
  if (id === "edge-redlock") return edgeRedlock(routes, counter, ttlMs, singleTry, {});
  if (id === "edge-redlock-10ms") return edgeRedlock(routes, counter, ttlMs, singleTry, REDIS_SEMAPHORE_WAITING);
  const used = id === "redis-semaphore" ? routes.slice(0, 1) : routes;
  const clients = await connect(used, counter);
  const lockOptions = { lockTimeout: ttlMs, ...(singleTry ? { acquireAttemptsLimit: 1 } : {}) };
  return {
    semaphore(name, permits) {
      return {
        async acquire(signal) {
          // One object per acquisition: a redis-semaphore object is one holder (one identifier).
          const semaphore =
            id === "redis-semaphore"
              ? new CountingSemaphore(clients[0] as IORedis, name, permits, lockOptions)
              : new RedlockSemaphore(clients, name, permits, lockOptions);
          try {
            if (!(await semaphore.tryAcquire(signal))) return null;
          } catch (error) {
            if (signal?.aborted) return null;
            throw error;
          }
          return { release: () => semaphore.release() };
        },
      };
    },
    close: async () => {
      for (const client of clients) client.disconnect();
    },
  };
}

function edgeRedlock(
  routes: readonly NodeRoute[],
  counter: RequestCounter,
  ttlMs: number,
  singleTry: boolean,
  waiting: RedlockOptions,
): SemaphoreClient {
  const nodes = routes.map(({ url, token, fetch: inner }) => {
    const send = inner ?? ((input: RequestInfo | URL, init?: RequestInit) => globalThis.fetch(input, init));
    const counted: typeof fetch = (input, init) => {
      counter.sent++;
      return send(input, init);
    };
    return { url, token, fetch: counted };
  });
  // A key prefix of this part's own: the nodes' cluster fingerprint binds a prefix to one node list.
  const redlock = new Redlock({ nodes, keyPrefix: "sem:", ...waiting });
  return {
    semaphore(name, permits) {
      const semaphore = new Semaphore(redlock, name, permits);
      return {
        async acquire(signal) {
          let lock: Lock | null;
          try {
            lock = singleTry
              ? await semaphore.tryAcquire(ttlMs, signal ? { signal } : undefined)
              : await semaphore.acquire(ttlMs, signal ? { signal } : undefined);
          } catch (error) {
            if (signal?.aborted || isGiveUp(error)) return null;
            throw error;
          }
          if (lock === null) return null;
          const held = lock;
          return {
            release: async () => {
              await held.release();
            },
          };
        },
      };
    },
    close: async () => {
      await redlock.settled();
    },
  };
}

/** One ioredis client per route, connected, each command it writes counted once. */
async function connect(routes: readonly NodeRoute[], counter: RequestCounter): Promise<IORedis[]> {
  const clients = routes.map((route) => new IORedis({ host: "127.0.0.1", port: route.tcpPort }));
  for (const client of clients) {
    client.on("error", () => {});
    // ioredis may pass one command through sendCommand twice (offline queue, resend): count it once.
    const seen = new WeakSet<object>();
    const send = client.sendCommand.bind(client);
    client.sendCommand = ((command, stream) => {
      if (!seen.has(command)) {
        seen.add(command);
        counter.sent++;
      }
      return send(command, stream);
    }) as typeof client.sendCommand;
  }
  await Promise.all(clients.map((client) => client.ping()));
  return clients;
}
