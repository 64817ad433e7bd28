/**
 * The nemesis: a fault schedule drawn from the run's seed, and the code that applies each fault to
 * the nodes (through tools/nodes), the fault proxy, or a client process, recording `fault-start`
 * and `fault-end` in the history.
 * @module
 */
import { Redis } from "ioredis";
import type { NodeCluster } from "../nodes/index.js";
import type { ClientProcess } from "./clients.js";
import { harnessNow } from "./clock.js";
import type { FaultKind, FaultSpec, HistoryEvent } from "./history.js";
import { HARNESS_SCRIPT_MARKER, type Monitors } from "./monitor.js";
import type { FaultProxy } from "./proxy.js";
import type { Rng } from "./rng.js";

/** A fault in the schedule: when it starts (ms after the workload started) and how long it lasts. */
export interface ScheduledFault {
  readonly atMs: number;
  readonly durationMs: number;
  readonly fault: FaultSpec;
}

/** What the schedule is drawn for. */
export interface ScheduleOptions {
  readonly kinds: readonly FaultKind[];
  readonly durationMs: number;
  readonly nodes: number;
  readonly clients: readonly string[];
  readonly quorum: number;
  readonly ttlMs: number;
  /** A node that single-node faults hit half the time (a hot key's gate node), or none. */
  readonly targetNode?: number;
}

/** Faults after which a node has forgotten keys or lost validity: spaced so at most one node is forgetful at a time. */
const AMNESIA: ReadonlySet<FaultKind> = new Set(["restart-now", "clock-jump"]);

/**
 * Draws a schedule: faults one after another (never two at once), each 300 ms to ~1.5 TTL, with
 * 100–400 ms of calm between them; forgetful faults at least a TTL apart.
 */
export function drawSchedule(rng: Rng, o: ScheduleOptions): ScheduledFault[] {
  const schedule: ScheduledFault[] = [];
  if (o.kinds.length === 0) return schedule;
  const nodeIndexes = Array.from({ length: o.nodes }, (_, i) => i);
  // Partitions cut a client from at most N - quorum nodes, so a quorum stays reachable.
  const maxCut = Math.max(1, o.nodes - o.quorum);
  let at = 200;
  let lastAmnesia = Number.NEGATIVE_INFINITY;
  let id = 1;
  while (at < o.durationMs - 300) {
    const kind = rng.pick(o.kinds);
    if (AMNESIA.has(kind) && at - lastAmnesia < o.ttlMs + 300) {
      at = lastAmnesia + o.ttlMs + 300;
      continue;
    }
    // A target draws once more, so schedules without one stay as they were for a given seed.
    const node = o.targetNode !== undefined && rng.next() < 0.5 ? o.targetNode : rng.pick(nodeIndexes);
    const client = rng.pick(o.clients);
    const applied = rng.next() < 0.5;
    let durationMs = rng.int(300, Math.max(400, Math.round(o.ttlMs * 1.2)));
    let fault: FaultSpec;
    switch (kind) {
      case "latency":
        fault = {
          id,
          kind,
          nodes: rng.sample(nodeIndexes, rng.int(1, maxCut)),
          params: { ms: rng.int(20, 150), jitterMs: rng.int(0, 60), phase: rng.pick(["request", "response"]) },
        };
        break;
      case "hang":
        fault = { id, kind, nodes: [node] };
        break;
      case "drop":
      case "http-5xx":
      case "garbage":
        fault = { id, kind, nodes: [node], params: { applied } };
        break;
      case "partition":
        fault = { id, kind, clients: [client], nodes: rng.sample(nodeIndexes, rng.int(1, maxCut)) };
        break;
      case "restart-now":
        fault = { id, kind, nodes: [node] };
        durationMs = 0;
        break;
      case "restart-delayed":
        // Down for longer than the longest TTL: the spec's delayed restart.
        durationMs = o.ttlMs + rng.int(200, 500);
        fault = { id, kind, nodes: [node] };
        break;
      case "pause-node":
        fault = { id, kind, nodes: [node] };
        break;
      case "clock-jump":
        fault = { id, kind, nodes: [node], params: { jumpMs: rng.int(Math.round(o.ttlMs / 2), o.ttlMs * 2) } };
        durationMs = 0;
        break;
      case "pause-client":
        durationMs = rng.int(Math.round(o.ttlMs * 1.2), o.ttlMs * 2);
        fault = { id, kind, clients: [client] };
        break;
      case "stall-client":
        durationMs = rng.int(100, Math.round(o.ttlMs * 1.5));
        fault = { id, kind, clients: [client], params: { ms: durationMs } };
        break;
      case "kill-client":
        durationMs = 0;
        fault = { id, kind };
        break;
      case "failover":
        throw new Error("failover is only driven by its own scenario");
    }
    if (AMNESIA.has(kind)) lastAmnesia = at;
    schedule.push({ atMs: at, durationMs, fault });
    id++;
    at += durationMs + rng.int(100, 400);
  }
  return schedule;
}

/** What the nemesis acts on. */
export interface NemesisContext {
  readonly cluster: NodeCluster;
  readonly proxy: FaultProxy;
  readonly monitors: Monitors;
  readonly ttlMs: number;
  readonly keyPrefix: string;
  /** The live client processes, by id. */
  readonly clients: () => readonly ClientProcess[];
  /** Kills a client and starts a replacement running the workload until the end of the run. */
  readonly replaceClient: (client: ClientProcess) => Promise<void>;
  readonly emit: (event: HistoryEvent) => void;
}

/** Shortens the TTL of every lock key on a node by `jumpMs`, deleting keys that reach zero. */
export const CLOCK_JUMP_SCRIPT = `${HARNESS_SCRIPT_MARKER}: forward clock jump
local shifted = 0
for _, key in ipairs(redis.call("KEYS", ARGV[2])) do
  local pttl = redis.call("PTTL", key)
  if pttl > 0 then
    local left = pttl - tonumber(ARGV[1])
    if left <= 0 then redis.call("DEL", key) else redis.call("PEXPIRE", key, left) end
    shifted = shifted + 1
  end
end
return shifted`;

/** Runs a forward clock jump on a redis-server (direct TCP). Returns how many keys were shifted. */
export async function clockJump(redisPort: number, jumpMs: number, keyPrefix: string): Promise<number> {
  const redis = new Redis({ host: "127.0.0.1", port: redisPort, lazyConnect: true, maxRetriesPerRequest: 0 });
  redis.on("error", () => {});
  try {
    await redis.connect();
    return Number(await redis.eval(CLOCK_JUMP_SCRIPT, 0, jumpMs, `${keyPrefix}*`));
  } finally {
    redis.disconnect();
  }
}

/**
 * Applies a fault, waits its duration, undoes it. Records both ends in the history. A fault still
 * on when the workload ends (`until`) is cut there, except a delayed restart, which by definition
 * stays down for longer than the TTL.
 */
export async function applyFault(
  ctx: NemesisContext,
  scheduled: ScheduledFault,
  until = Number.POSITIVE_INFINITY,
): Promise<void> {
  const hold = () => sleep(Math.min(scheduled.durationMs, until - harnessNow()));
  let fault = scheduled.fault;
  const start = (f: FaultSpec) =>
    ctx.emit({ t: harnessNow(), process: "nemesis", type: "info", f: "fault-start", fault: f });
  const end = (f: FaultSpec) =>
    ctx.emit({ t: harnessNow(), process: "nemesis", type: "info", f: "fault-end", fault: f });
  const node = fault.nodes?.[0] ?? 0;
  const target = () => ctx.clients().find((c) => c.id === fault.clients?.[0] && c.alive());
  switch (fault.kind) {
    case "latency":
    case "hang":
    case "drop":
    case "http-5xx":
    case "garbage":
    case "partition":
      start(fault);
      ctx.proxy.add(fault);
      await hold();
      ctx.proxy.remove(fault.id);
      end(fault);
      return;
    case "restart-now": {
      start(fault);
      // The restarted node serves clients before its MONITOR is open again.
      const since = harnessNow();
      await ctx.cluster.restart(node);
      await ctx.monitors.reconnect(node, "empty", undefined, since);
      end(fault);
      return;
    }
    case "restart-delayed": {
      start(fault);
      await ctx.cluster.kill(node);
      await sleep(scheduled.durationMs);
      const since = harnessNow();
      await ctx.cluster.restart(node);
      await ctx.monitors.reconnect(node, "empty", undefined, since);
      end(fault);
      return;
    }
    case "pause-node":
      start(fault);
      ctx.cluster.pause(node);
      await hold();
      ctx.cluster.resume(node);
      end(fault);
      return;
    case "clock-jump": {
      const info = ctx.cluster.nodes[node];
      if (!info) return;
      start(fault);
      const shifted = await clockJump(info.redisPort, Number(fault.params?.jumpMs ?? ctx.ttlMs), ctx.keyPrefix).catch(
        () => -1,
      );
      end({ ...fault, params: { ...fault.params, keysShifted: shifted } });
      return;
    }
    case "pause-client": {
      const client = target();
      if (!client) return;
      start(fault);
      client.pause();
      await hold();
      client.resume();
      end(fault);
      return;
    }
    case "stall-client": {
      const client = target();
      if (!client) return;
      start(fault);
      client.stall(scheduled.durationMs);
      await sleep(scheduled.durationMs);
      end(fault);
      return;
    }
    case "kill-client": {
      // The holder dies: wait (bounded) for some client to hold a lock, then SIGKILL it.
      let victim: ClientProcess | undefined;
      for (let i = 0; i < 100 && !victim; i++) {
        victim = ctx.clients().find((c) => c.alive() && c.holding() !== null);
        if (!victim) await sleep(10);
      }
      victim ??= ctx.clients().find((c) => c.alive());
      if (!victim) return;
      const holding = victim.holding();
      fault = { ...fault, clients: [victim.id], params: { ...(holding ? { holding } : {}) } };
      start(fault);
      await ctx.replaceClient(victim);
      end(fault);
      return;
    }
    case "failover":
      return;
  }
}

/**
 * Runs a schedule from `startedAt` (harness time) on, skipping faults that would start after
 * `until` (slow faults, such as restarts, push the later ones back). Resolves when the last fault has ended.
 */
export async function runSchedule(
  ctx: NemesisContext,
  schedule: readonly ScheduledFault[],
  startedAt: number,
  until: number,
): Promise<void> {
  for (const scheduled of schedule) {
    if (harnessNow() + Math.min(scheduled.durationMs, 300) > until) return;
    const wait = startedAt + scheduled.atMs - harnessNow();
    if (wait > 0) await sleep(wait);
    await applyFault(ctx, scheduled, until);
  }
}

/** Promise-based setTimeout. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
