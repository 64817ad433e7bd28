/**
 * Fixed schedules, driven step by step, for the negative controls and the S8 schedule: they do not
 * hope random faults line up, so each control fires on every run.
 * @module
 */
import { Redis } from "ioredis";
import { extendScript } from "../../src/core/scripts/extend.js";
import type { NodeCluster } from "../nodes/index.js";
import type { ClientProcess } from "./clients.js";
import { harnessNow } from "./clock.js";
import type { FaultSpec, HistoryEvent } from "./history.js";
import type { Monitors } from "./monitor.js";
import { clockJump, sleep } from "./nemesis.js";
import type { StaleToken } from "./protocol.js";
import type { FaultProxy } from "./proxy.js";

/** What a driver works with. */
export interface DriverContext {
  readonly clients: readonly ClientProcess[];
  readonly cluster: NodeCluster;
  readonly proxy: FaultProxy;
  readonly monitors: Monitors;
  readonly nodes: number;
  readonly quorum: number;
  readonly ttlMs: number;
  readonly keyPrefix: string;
  readonly emit: (event: HistoryEvent) => void;
  /**
   * The last token a worker shared on releasing `resources` (a `release` step with `shareToken`),
   * for the by-token steps; `tag`: the cluster's history tag (see {@link DriverContext.twinTag}).
   */
  readonly lastToken: (resources: string | readonly string[], tag?: string) => StaleToken | undefined;
  /** The history tag of the second cluster's resources, in a scenario with two (see `TwinCluster`). */
  readonly twinTag: string;
  /** The failover control only: promote the replica after killing the master (see harness.ts). */
  readonly failover?: { readonly blockReplication: () => void; readonly failOver: () => Promise<void> };
}

let nextFaultId = 10_000;

/** Records a fault around `action` (start before, end after). */
async function fault<T>(ctx: DriverContext, spec: Omit<FaultSpec, "id">, action: () => Promise<T>): Promise<T> {
  const f: FaultSpec = { id: nextFaultId++, ...spec };
  ctx.emit({ t: harnessNow(), process: "nemesis", type: "info", f: "fault-start", fault: f });
  try {
    return await action();
  } finally {
    ctx.emit({ t: harnessNow(), process: "nemesis", type: "info", f: "fault-end", fault: f });
  }
}

/** Starts a fault that stays on until the returned function is called. */
export function open(ctx: DriverContext, spec: Omit<FaultSpec, "id">): () => void {
  const f: FaultSpec = { id: nextFaultId++, ...spec };
  ctx.emit({ t: harnessNow(), process: "nemesis", type: "info", f: "fault-start", fault: f });
  ctx.proxy.add(f);
  return () => {
    ctx.proxy.remove(f.id);
    ctx.emit({ t: harnessNow(), process: "nemesis", type: "info", f: "fault-end", fault: f });
  };
}

export function clientsOf(ctx: DriverContext, count: number): ClientProcess[] {
  if (ctx.clients.length < count) throw new Error(`this schedule needs ${count} clients, got ${ctx.clients.length}`);
  return ctx.clients.slice(0, count) as ClientProcess[];
}

export function note(ctx: DriverContext, text: string, data: Record<string, unknown> = {}): void {
  ctx.emit({ t: harnessNow(), process: "harness", type: "info", f: "note", data: { text, ...data } });
}

/** SCRIPT LOAD over TCP, straight to a redis-server. */
async function loadScript(port: number, source: string): Promise<void> {
  const redis = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1 });
  redis.on("error", () => {});
  try {
    await redis.connect();
    await redis.script("LOAD", source);
  } finally {
    redis.disconnect();
  }
}

/** Waits until a process is in the stopped state (it SIGSTOPped itself). Bounded. */
async function waitStopped(pid: number, timeoutMs = 5_000): Promise<boolean> {
  const { readFileSync } = await import("node:fs");
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "T") return true;
    } catch {
      return false;
    }
    await sleep(5);
  }
  return false;
}

/** The drivers, by name. */
export const drivers = {
  /**
   * safety.md S8 (Kleppmann's schedule, with amnesia in place of the clock jump), N = 5. A is cut
   * from the nodes beyond the first q and acquires on them (q=3: {0,1,2}; q=4: {0,1,2,3}). Node 2
   * restarts empty at once. B is cut from {0,1}, so it reaches {2,3,4}, and tries. At q=3 it wins
   * all three while A still holds: an overlap. At q=4 node 3 still holds A's key, B gets at most
   * 2 votes: no overlap.
   */
  s8: (ctx: DriverContext) => kleppmann(ctx, "restart-now"),

  /**
   * safety.md S5, Kleppmann's clock-jump schedule: the same as {@link drivers.s8}, but node 2
   * keeps running and its clock jumps forward by twice the TTL (every lock key on it expires).
   */
  s5: (ctx: DriverContext) => kleppmann(ctx, "clock-jump"),

  /**
   * safety.md S10, the spec's "why failover is not enough": one Redis master with a replica. The
   * replication link is blocked, A acquires on the master, the master dies before the key
   * reached the replica, the replica is promoted, and B acquires the same resource.
   */
  async failover(ctx: DriverContext): Promise<void> {
    const [a, b] = clientsOf(ctx, 2) as [ClientProcess, ClientProcess];
    const control = ctx.failover;
    if (!control) throw new Error("the failover schedule needs a replicated node");
    const resource = `${ctx.keyPrefix}failover`;
    control.blockReplication();
    const aGot = await a.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs });
    note(ctx, "A acquired on the master", { ok: aGot.ok });
    if (!aGot.ok) return;
    await fault(ctx, { kind: "failover", nodes: [0] }, () => control.failOver());
    const bGot = await b.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs });
    note(ctx, "B tried on the promoted replica", { ok: bGot.ok });
    if (bGot.ok) await b.perform({ op: "release" });
    await a.perform({ op: "release" });
  },

  /**
   * safety.md S1: A holds the lock, reads the counter, checks its lock is still valid, and is
   * paused (SIGSTOP) right after the check for longer than the TTL. B acquires, increments, and
   * releases. A resumes and writes its stale value: the unfenced counter loses B's update.
   */
  async unfencedPause(ctx: DriverContext): Promise<void> {
    const [a, b] = clientsOf(ctx, 2) as [ClientProcess, ClientProcess];
    const resource = `${ctx.keyPrefix}pause`;
    const aGot = await a.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs });
    if (!aGot.ok) return;
    await a.perform({ op: "read" });
    const writing = a.perform({ op: "write", pauseAfterCheck: true });
    const f: FaultSpec = { id: nextFaultId++, kind: "pause-client", clients: [a.id] };
    const stopped = await waitStopped(a.pid);
    ctx.emit({ t: harnessNow(), process: "nemesis", type: "info", f: "fault-start", fault: f });
    note(ctx, "A paused between its check and its write", { stopped });
    // B retries until A's lease has run out (bounded).
    let bGot = { ok: false };
    for (let i = 0; i < 10 && !bGot.ok; i++) bGot = await b.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs });
    if (bGot.ok) {
      await b.perform({ op: "read" });
      await b.perform({ op: "write" });
      await b.perform({ op: "release" });
    }
    ctx.emit({ t: harnessNow(), process: "nemesis", type: "info", f: "fault-end", fault: f });
    a.resume();
    await writing;
    await a.perform({ op: "release" });
  },

  /**
   * A broken client: its clock stands still while requests are in flight, so the round trip is
   * not subtracted from the validity. Every node answers 200 ms late; each grant over-claims.
   */
  async brokenClock(ctx: DriverContext): Promise<void> {
    const [a] = clientsOf(ctx, 1) as [ClientProcess];
    const all = Array.from({ length: ctx.nodes }, (_, i) => i);
    const heal = open(ctx, { kind: "latency", nodes: all, params: { ms: 200, jitterMs: 0, phase: "response" } });
    for (let round = 0; round < 2; round++) {
      const got = await a.perform({ op: "acquire", resource: `${ctx.keyPrefix}clock`, ttlMs: ctx.ttlMs });
      if (got.ok) await a.perform({ op: "release" });
    }
    heal();
  },

  /**
   * The shortened-extension defect: acquire with a long TTL, extend with a short one. The keys now
   * expire by the short TTL; a build that keeps the old, later deadline claims far beyond them.
   */
  async shortenedExtension(ctx: DriverContext): Promise<void> {
    const [a] = clientsOf(ctx, 1) as [ClientProcess];
    const got = await a.perform({ op: "acquire", resource: `${ctx.keyPrefix}extend`, ttlMs: ctx.ttlMs });
    if (!got.ok) return;
    await a.perform({ op: "extend", ttlMs: Math.round(ctx.ttlMs / 5) });
    await a.perform({ op: "release" });
  },

  /**
   * A shortening extension that fails on the client but was applied on some nodes: every node
   * runs the compare-and-PEXPIRE, and 3 of 5 lose their answer (the connection drops after the
   * command ran). The extension is reported failed, the keys on those 3 nodes now expire by the
   * short TTL, and the lock must not go on claiming its old, longer deadline.
   */
  async failedShorterExtension(ctx: DriverContext): Promise<void> {
    const [a] = clientsOf(ctx, 1) as [ClientProcess];
    const got = await a.perform({ op: "acquire", resource: `${ctx.keyPrefix}extend-lost`, ttlMs: ctx.ttlMs });
    if (!got.ok) return;
    // The script is loaded on every node first, so the extension runs by EVALSHA at once (a
    // NOSCRIPT answer would be dropped instead, and nothing applied).
    await Promise.all(ctx.cluster.nodes.map((n) => loadScript(n.redisPort, extendScript.source)));
    const lost = Array.from({ length: ctx.nodes - ctx.quorum + 1 }, (_, i) => i);
    const heal = open(ctx, { kind: "drop", nodes: lost, params: { applied: true } });
    const extended = await a.perform({ op: "extend", ttlMs: Math.round(ctx.ttlMs / 5) });
    heal();
    note(ctx, "extension with lost answers", { ok: extended.ok, nodes: lost });
    // The holder goes on using the lock as long as it claims it.
    await sleep(ctx.ttlMs * 0.8);
    await a.perform({ op: "release" });
  },

  /**
   * A release that does not compare tokens: A's lock expires, B acquires, A releases late and
   * deletes B's key; C then acquires while B still claims the lock.
   */
  async brokenRelease(ctx: DriverContext): Promise<void> {
    const [a, b, c] = clientsOf(ctx, 3) as [ClientProcess, ClientProcess, ClientProcess];
    const resource = `${ctx.keyPrefix}release`;
    const long = ctx.ttlMs * 4;
    const aGot = await a.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs });
    if (!aGot.ok) return;
    await sleep(ctx.ttlMs + 400);
    const bGot = await b.perform({ op: "acquire", resource, ttlMs: long });
    note(ctx, "B acquired after A's lease ended", { ok: bGot.ok });
    await a.perform({ op: "release" });
    const cGot = await c.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs });
    note(ctx, "C tried while B still claims the lock", { ok: cGot.ok });
    if (cGot.ok) await c.perform({ op: "release" });
    if (bGot.ok) await b.perform({ op: "release" });
  },
} as const;

/** The S5/S8 schedule: A holds the first q nodes, node 2 forgets, B reaches {2,3,4}. */
async function kleppmann(ctx: DriverContext, amnesia: "restart-now" | "clock-jump"): Promise<void> {
  const [a, b] = clientsOf(ctx, 2) as [ClientProcess, ClientProcess];
  const all = Array.from({ length: ctx.nodes }, (_, i) => i);
  const aNodes = all.slice(0, ctx.quorum);
  const forgetful = 2;
  const bCut = [0, 1];
  const resource = `${ctx.keyPrefix}kleppmann`;
  const healA = open(ctx, { kind: "partition", clients: [a.id], nodes: all.filter((i) => !aNodes.includes(i)) });
  const aGot = await a.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs });
  healA();
  note(ctx, "A acquired on its side", { ok: aGot.ok, nodes: aNodes });
  if (!aGot.ok) return;
  await a.perform({ op: "read" });
  if (amnesia === "restart-now") {
    await fault(ctx, { kind: "restart-now", nodes: [forgetful] }, async () => {
      const since = harnessNow();
      await ctx.cluster.restart(forgetful);
      await ctx.monitors.reconnect(forgetful, "empty", undefined, since);
    });
  } else {
    const jumpMs = ctx.ttlMs * 2;
    await fault(ctx, { kind: "clock-jump", nodes: [forgetful], params: { jumpMs } }, () =>
      clockJump(ctx.cluster.nodes[forgetful]?.redisPort as number, jumpMs, ctx.keyPrefix),
    );
  }
  const healB = open(ctx, { kind: "partition", clients: [b.id], nodes: bCut });
  // A few attempts (a loaded machine times requests out), all well within A's claim.
  const bGot = await b.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs });
  healB();
  note(ctx, "B tried after node 2 forgot", { ok: bGot.ok, cut: bCut });
  if (bGot.ok) {
    await b.perform({ op: "read" });
    await b.perform({ op: "write" });
    await b.perform({ op: "release" });
  }
  await a.perform({ op: "write" });
  await a.perform({ op: "release" });
}
