/**
 * Part 9: subrequests (outgoing HTTP requests, what Cloudflare Workers budget) per acquire, extend
 * and release, uncontended and while waiting for another holder. Each client's requests are
 * counted by a global `fetch` wrapper that reads which client the call belongs to from an
 * AsyncLocalStorage context; the bridges' own counts check the total.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { Lock as UpstashLock } from "@upstash/lock";
import { Redis as UpstashRedis } from "@upstash/redis";
import { fencing, initializeFencing } from "../../../src/fencing/index.js";
import { type Lock, Redlock, type RedlockOptions } from "../../../src/index.js";
import { type BenchContext, emptyPart, type PartResult } from "../context.js";
import { fmt, median, sleep } from "../stats.js";
import { EDGE_REDLOCK_EQUAL, EQUAL_POLICY } from "../systems.js";

const TTL_MS = 10_000;

interface Ops {
  /** A handle, or null when the system gave up (its retries ran out). */
  acquire(key: string): Promise<unknown | null>;
  extend(handle: unknown): Promise<void>;
  release(handle: unknown): Promise<void>;
  settle(): Promise<void>;
}

/**
 * `elsewhere`: a client as another isolate would make it, sharing nothing with this process's
 * other clients (edge-redlock's clients of the same nodes in one isolate share what they know of
 * a key: a waiter behind a holder of its own isolate queues up without a first fan-out). Its
 * nodes get a `fetch` of their own, which still goes through the counting global `fetch`.
 */
function edgeRedlockOps(nodes: { url: string; token: string }[], options: RedlockOptions, elsewhere = false): Ops {
  const own = elsewhere
    ? nodes.map((node) => ({ ...node, fetch: (...args: Parameters<typeof fetch>) => fetch(...args) }))
    : nodes;
  const redlock = new Redlock({ nodes: own, ...options });
  return {
    acquire: async (key) => {
      try {
        return await redlock.acquire(key, TTL_MS);
      } catch (error) {
        if ((error as { code?: string }).code === "LOCK_HELD") return null;
        throw error;
      }
    },
    extend: async (handle) => {
      await (handle as Lock).extend(TTL_MS);
    },
    release: async (handle) => {
      await (handle as Lock).release();
    },
    settle: async () => {
      await redlock.settled();
    },
  };
}

function upstashLockOps(node: { url: string; token: string }, retry?: { attempts: number; delay: number }): Ops {
  const redis = new UpstashRedis({ ...node, enableTelemetry: false });
  return {
    acquire: async (key) => {
      const lock = new UpstashLock({ id: key, redis, lease: TTL_MS, ...(retry ? { retry } : {}) });
      return (await lock.acquire()) ? lock : null;
    },
    extend: async (handle) => {
      await (handle as UpstashLock).extend(TTL_MS);
    },
    release: async (handle) => {
      await (handle as UpstashLock).release();
    },
    settle: async () => {},
  };
}

/** Fencing needs a one-time initialisation of the nodes; a second one is refused, which is fine here. */
async function initializeFencingOnce(nodes: { url: string; token: string }[]): Promise<void> {
  try {
    await initializeFencing(new Redlock({ nodes }));
  } catch (error) {
    if ((error as { code?: string }).code !== "FENCING_INIT_REFUSED") throw error;
  }
}

export async function subrequestsPart(ctx: BenchContext): Promise<PartResult> {
  const part = emptyPart("subrequests", "Subrequests per operation");
  const { smoke, quick } = ctx.options;
  const n = smoke ? 3 : 5;
  const holdMs = smoke ? 100 : 300;
  const repeats = smoke ? 1 : quick ? 3 : 5;
  const delayMs = smoke ? 5 : 20;
  part.method.push(
    `N = ${n}, +${delayMs} ms per node. Requests each client sent (counted per client through an AsyncLocalStorage-tagged fetch wrapper), including background cleanup (awaited with redlock.settled()). Median of ${repeats} repeats.`,
    `While waiting: another client of the same system holds the key and releases it after ${holdMs} ms (for edge-redlock a client as another isolate makes it: one of the same isolate would spare the waiter its first fan-out); counted are the waiter's requests until it holds the lock, calling acquire() again when it gives up (as an application would).`,
    "edge-redlock (equal) is the hot-key part's equal policy: 10 attempts, backoff base and ceiling 100 ms, so it still waits in line at the gate. edge-redlock (fencing) acquires with the `fencing` option of edge-redlock/fencing (two phases per attempt; a fenced lock waits with backoff, not in line) on nodes initialised once with `initializeFencing(redlock)`.",
  );
  await ctx.host.setUniformDelay(delayMs);
  const storage = new AsyncLocalStorage<string>();
  const counts = new Map<string, number>();
  const originalFetch = globalThis.fetch;
  globalThis.fetch = ((input: Parameters<typeof fetch>[0], init?: RequestInit) => {
    const tag = storage.getStore();
    if (tag) counts.set(tag, (counts.get(tag) ?? 0) + 1);
    return originalFetch(input, init);
  }) as typeof fetch;
  const counted = async (tag: string, work: () => Promise<unknown>) => {
    counts.set(tag, 0);
    const value = await storage.run(tag, work);
    return { value, requests: counts.get(tag) ?? 0 };
  };
  const nodes = ctx.host.nodes.slice(0, n).map(({ url, token }) => ({ url, token }));
  const systems: { label: string; make: (elsewhere?: boolean) => Ops }[] = [
    { label: "edge-redlock (defaults)", make: (elsewhere) => edgeRedlockOps(nodes, {}, elsewhere) },
    {
      label: "edge-redlock (equal)",
      make: (elsewhere) => edgeRedlockOps(nodes, EDGE_REDLOCK_EQUAL, elsewhere),
    },
    { label: "edge-redlock (fencing)", make: (elsewhere) => edgeRedlockOps(nodes, { fencing }, elsewhere) },
    { label: "@upstash/lock (defaults)", make: () => upstashLockOps(nodes[0]!) },
    {
      label: "@upstash/lock (equal)",
      make: () => upstashLockOps(nodes[0]!, { attempts: EQUAL_POLICY.attempts, delay: EQUAL_POLICY.delayMs }),
    },
  ];
  const rows: string[][] = [];
  let serial = 0;
  try {
    await initializeFencingOnce(nodes);
    for (const system of systems) {
      const figures = {
        acquire: [] as number[],
        extend: [] as number[],
        release: [] as number[],
        calls: [] as number[],
        waiting: [] as number[],
      };
      for (let r = 0; r < repeats; r++) {
        const ops = system.make();
        const key = `sub:${process.pid}:${serial++}`;
        const acquired = await counted("c", async () => {
          const handle = await ops.acquire(key);
          if (handle === null) throw new Error(`${system.label} did not acquire a free key`);
          await ops.settle();
          return handle;
        });
        figures.acquire.push(acquired.requests);
        figures.extend.push((await counted("c", () => ops.extend(acquired.value))).requests);
        figures.release.push(
          (
            await counted("c", async () => {
              await ops.release(acquired.value);
              await ops.settle();
            })
          ).requests,
        );

        // The holder is in another isolate, as a contended lock's holder usually is.
        const holder = system.make(true);
        const waiter = system.make();
        const contended = `sub:${process.pid}:${serial++}`;
        const held = await holder.acquire(contended);
        const releasing = sleep(holdMs).then(() => holder.release(held));
        // Like an application would, call acquire again after a give-up (bounded).
        const waited = await counted("waiter", async () => {
          for (let call = 1; call <= 20; call++) {
            const handle = await waiter.acquire(contended);
            if (handle !== null) {
              await waiter.settle();
              return { handle, calls: call };
            }
          }
          throw new Error(`${system.label} never acquired after the holder released`);
        });
        await releasing;
        figures.waiting.push(waited.requests);
        figures.calls.push((waited.value as { calls: number }).calls);
        await waiter.release((waited.value as { handle: unknown }).handle);
        await Promise.all([holder.settle(), waiter.settle()]);
      }
      rows.push([
        system.label,
        fmt(median(figures.acquire)),
        fmt(median(figures.extend)),
        fmt(median(figures.release)),
        fmt(median(figures.waiting)),
        `${Math.min(...figures.waiting)}–${Math.max(...figures.waiting)}`,
        fmt(median(figures.calls)),
      ]);
    }
  } finally {
    globalThis.fetch = originalFetch;
    await ctx.host.setUniformDelay(0);
  }
  part.tables.push({
    title: `Subrequests per operation (N = ${n}; @upstash/lock: 1 node)`,
    columns: [
      "system",
      "acquire (free)",
      "extend",
      "release",
      `acquire while held ${holdMs} ms (median)`,
      "range",
      "acquire() calls (after give-ups)",
    ],
    rows,
  });
  return part;
}
