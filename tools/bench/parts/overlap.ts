/**
 * Part: overlapping resource sets. Half the clients lock ["a", "b"], the other half ["b", "c"],
 * in a loop, for a window: how the grants split between the two sets, and whether any key ever
 * had two holders at once. edge-redlock's lines are per resource set (see the README, "How
 * waiting works"): sets that share keys cannot share a line, and wait with backoff once they meet.
 */
import { Redlock as SesameRedlock } from "@sesamecare-oss/redlock";
import { fullJitterDelay } from "../../../src/core/backoff.js";
import { DEFAULT_OPTIONS } from "../../../src/core/options.js";
import { Redlock, type RedlockOptions } from "../../../src/index.js";
import { type BenchContext, emptyPart, type PartResult } from "../context.js";
import type { HostNode } from "../node-host-protocol.js";
import { fmt, sleep } from "../stats.js";
import { ioredisClients, isGiveUp } from "../systems.js";

const TTL_MS = 10_000;

/** One client's lock: acquire a set (null when it gave up), release it. */
interface SetLocker {
  acquire(keys: string[]): Promise<{ release(): Promise<unknown> } | null>;
  close(): Promise<void>;
}

interface Outcome {
  grants: [number, number];
  giveUps: [number, number];
  overlaps: number;
}

/** The default backoff schedule, given as a `retryDelay`: fan-outs, no line. */
function backoff({ attempt }: { attempt: number }): number {
  return fullJitterDelay(attempt, DEFAULT_OPTIONS.retryBaseDelayMs, DEFAULT_OPTIONS.retryMaxDelayMs, Math.random());
}

async function edgeRedlock(nodes: readonly HostNode[], options: RedlockOptions): Promise<SetLocker> {
  const redlock = new Redlock({ nodes: nodes.map(({ url, token }) => ({ url, token })), ...options });
  return {
    async acquire(keys) {
      try {
        return await redlock.acquire(keys, TTL_MS);
      } catch (error) {
        if (isGiveUp(error)) return null;
        throw error;
      }
    },
    close: async () => {
      await redlock.settled();
    },
  };
}

async function sesame(nodes: readonly HostNode[]): Promise<SetLocker> {
  const { clients, close } = await ioredisClients(nodes.length, { kind: "servers", nodes });
  const redlock = new SesameRedlock(clients);
  return {
    async acquire(keys) {
      try {
        const lock = await redlock.acquire(keys, TTL_MS);
        return { release: () => redlock.release(lock).catch(() => {}) };
      } catch (error) {
        if ((error as Error).name === "ExecutionError") return null;
        throw error;
      }
    },
    close,
  };
}

/** `clients` lockers (null: no lock at all) loop over their set for `windowMs`, each holding `holdMs`. */
async function run(
  make: (() => Promise<SetLocker>) | null,
  clients: number,
  windowMs: number,
  holdMs: number,
  tag: string,
): Promise<Outcome> {
  const sets = [
    [`ov:${tag}:a`, `ov:${tag}:b`],
    [`ov:${tag}:b`, `ov:${tag}:c`],
  ];
  const holders = new Map<string, number>();
  const outcome: Outcome = { grants: [0, 0], giveUps: [0, 0], overlaps: 0 };
  const end = performance.now() + windowMs;
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      const set = (client % 2) as 0 | 1;
      const keys = sets[set] as string[];
      const locker = await make?.();
      try {
        while (performance.now() < end) {
          const lock = locker ? await locker.acquire(keys) : { release: async () => {} };
          if (lock === null) {
            outcome.giveUps[set]++;
            continue;
          }
          // The critical section: every key counts its holders; two at once is an overlap.
          for (const key of keys) {
            const count = (holders.get(key) ?? 0) + 1;
            holders.set(key, count);
            if (count > 1) outcome.overlaps++;
          }
          await sleep(holdMs);
          for (const key of keys) holders.set(key, (holders.get(key) ?? 1) - 1);
          if (performance.now() <= end) outcome.grants[set]++;
          await lock.release();
        }
      } finally {
        await locker?.close();
      }
    }),
  );
  return outcome;
}

export async function overlapPart(ctx: BenchContext): Promise<PartResult> {
  const part = emptyPart("overlap", "Overlapping resource sets");
  const { smoke, quick } = ctx.options;
  const clients = smoke ? 4 : 8;
  const windowMs = smoke ? 500 : quick ? 3000 : 5000;
  const holdMs = 40;
  const delayMs = 20;
  part.method.push(
    `N = 5, +${delayMs} ms per node. ${clients} clients, each its own client instance, all in the benchmark's process: half loop acquire ["a", "b"] → hold ${holdMs} ms → release, the other half ["b", "c"], for ${windowMs / 1000} s.`,
    "Grants: sections finished inside the window, per set. Overlapping holds: a key with two holders at once, counted in the process (every client shares it). Give-ups: acquire() calls that ended held elsewhere (the client then calls acquire again).",
    "edge-redlock (backoff, no line) passes the default backoff schedule (full jitter, base 100 ms, ceiling 2 s) as a `retryDelay`, which turns waiting in line off from the first attempt; with its defaults edge-redlock waits in line until a poll finds its keys partly held, then with the same backoff.",
  );
  await ctx.host.setUniformDelay(delayMs);
  const nodes = ctx.host.nodes.slice(0, 5);
  const systems: { label: string; make: (() => Promise<SetLocker>) | null }[] = [
    { label: "edge-redlock (defaults)", make: () => edgeRedlock(nodes, {}) },
    { label: "edge-redlock (backoff, no line)", make: () => edgeRedlock(nodes, { retryDelay: backoff }) },
    { label: "@sesamecare-oss/redlock (defaults)", make: () => sesame(nodes) },
    { label: "no lock (negative control)", make: null },
  ];
  const rows: string[][] = [];
  try {
    for (const [i, system] of systems.entries()) {
      ctx.log(`  overlapping sets: ${system.label}`);
      const outcome = await run(
        system.make,
        clients,
        windowMs,
        holdMs,
        `${process.pid}:${Date.now().toString(36)}:${i}`,
      );
      const [ab, bc] = outcome.grants;
      const total = ab + bc;
      rows.push([
        system.label,
        String(ab),
        String(bc),
        total > 0 ? `${fmt((100 * Math.min(ab, bc)) / total, 0)} %` : "–",
        `${outcome.giveUps[0]} / ${outcome.giveUps[1]}`,
        String(outcome.overlaps),
      ]);
      part.violations.push({ label: `overlapping sets, ${system.label}`, lostUpdates: 0, overlaps: outcome.overlaps });
    }
  } finally {
    await ctx.host.setUniformDelay(0);
  }
  part.tables.push({
    title: `Overlapping resource sets (N = 5, +${delayMs} ms, ${clients} clients, ${windowMs / 1000} s)`,
    columns: [
      "system",
      'grants ["a", "b"]',
      'grants ["b", "c"]',
      "smaller set's share",
      "give-ups",
      "overlapping holds",
    ],
    rows,
  });
  part.notes.push(
    "edge-redlock's lines are per resource set: the two sets have different gates, and neither line sees the other's releases. A line left alone keeps the shared key with takes aimed at its own releases (one set got 0–3 % of the grants in some runs before the change), so a waiter whose gate finds its keys partly held leaves the line for backoff, and so does every waiter of that gate for the next 2 s.",
  );
  return part;
}
