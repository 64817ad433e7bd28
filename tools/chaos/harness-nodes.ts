/**
 * The nodes of a run, seen from the harness: the nodes shared by the scenarios (and how each
 * scenario gets them back fresh), fencing's initialisation, the failover control's replica, and
 * direct reads of the nodes (their clocks, the keys left after a run).
 * @module
 */
import { Redis } from "ioredis";
import { initializeFencing } from "../../src/fencing/index.js";
import { FencingError, Redlock } from "../../src/index.js";
import { type NodeCluster, startNodes } from "../nodes/index.js";
import { harnessNow } from "./clock.js";
import type { HistoryEvent } from "./history.js";
import type { startMonitors } from "./monitor.js";
import { sleep } from "./nemesis.js";
import type { startFaultProxy } from "./proxy.js";
import { startTcpRelay, type TcpRelay } from "./tcp-relay.js";

/**
 * Nodes shared by the scenarios of a run (starting 5 nodes costs more than a short scenario):
 * before each scenario, every node is brought back (restarted if killed, continued if paused) and
 * emptied, scripts included, so it behaves as a fresh node.
 */
export interface SharedNodes {
  /** Lock nodes, for every scenario with as many nodes and no replica. */
  readonly cluster: NodeCluster;
  /** The resource store (protected counters). */
  readonly store: NodeCluster;
}

/** Starts {@link SharedNodes}. */
export async function startSharedNodes(count = 5): Promise<SharedNodes & { stop(): Promise<void> }> {
  const cluster = await startNodes({ count });
  const store = await startNodes({ count: 1 }).catch(async (error) => {
    await cluster.stop();
    throw error;
  });
  return {
    cluster,
    store,
    stop: async () => {
      await Promise.all([cluster.stop(), store.stop()]);
    },
  };
}

/** Brings every node of a shared cluster back to a fresh, running, empty state. */
export async function refresh(cluster: NodeCluster): Promise<void> {
  const running = new Set(cluster.pids());
  for (const node of cluster.nodes) {
    if (running.has(node.pid)) cluster.resume(node.index);
    else await cluster.restart(node.index);
    cluster.setDelay(node.index, 0);
    const redis = new Redis({ host: "127.0.0.1", port: node.redisPort, maxRetriesPerRequest: 1 });
    try {
      await redis.flushall();
      await redis.script("FLUSH");
    } finally {
      redis.disconnect();
    }
  }
}

/**
 * Mark the lock nodes for fencing, once per fenced scenario (the nodes are flushed between
 * scenarios). A refusal because a marker is already there is fine: they are marked.
 */
export async function initializeFencingOn(nodes: readonly { url: string; token: string }[]): Promise<void> {
  const redlock = new Redlock({ nodes: nodes.map(({ url, token }) => ({ url, token })) });
  try {
    await initializeFencing(redlock);
  } catch (error) {
    if (!(error instanceof FencingError && error.code === "FENCING_INIT_REFUSED")) throw error;
  }
}

/** Node 1 becomes a replica of node 0 through a relay, and the harness waits for the initial sync. */
export async function startReplica(cluster: NodeCluster): Promise<TcpRelay> {
  const [master, replica] = cluster.nodes as [(typeof cluster.nodes)[0], (typeof cluster.nodes)[0]];
  const relay = await startTcpRelay(master.redisPort);
  // The master would otherwise wait 5 s for more replicas before a diskless full sync.
  const masterConnection = new Redis({ host: "127.0.0.1", port: master.redisPort, maxRetriesPerRequest: 1 });
  try {
    await masterConnection.call("CONFIG", "SET", "repl-diskless-sync-delay", "0");
  } finally {
    masterConnection.disconnect();
  }
  const redis = new Redis({ host: "127.0.0.1", port: replica.redisPort, maxRetriesPerRequest: 1 });
  try {
    await redis.call("REPLICAOF", "127.0.0.1", String(relay.port));
    for (let i = 0; i < 400; i++) {
      const info = String(await redis.call("INFO", "replication"));
      if (/master_link_status:up/.test(info)) return relay;
      await sleep(25);
    }
    throw new Error("the replica did not sync with its master within 10 s");
  } finally {
    redis.disconnect();
  }
}

/** Kills the master, promotes the replica, and points lock node 0 (proxy and MONITOR) at it. */
export async function failOver(
  cluster: NodeCluster,
  proxy: Awaited<ReturnType<typeof startFaultProxy>>,
  monitors: Awaited<ReturnType<typeof startMonitors>>,
): Promise<void> {
  const replica = cluster.nodes[1];
  if (!replica) throw new Error("no replica");
  await cluster.kill(0);
  const redis = new Redis({ host: "127.0.0.1", port: replica.redisPort, maxRetriesPerRequest: 1 });
  try {
    await redis.call("REPLICAOF", "NO", "ONE");
  } finally {
    redis.disconnect();
  }
  proxy.retarget(0, replica.url, replica.token);
  await monitors.reconnect(0, "gap", replica.redisPort);
}

/**
 * Records each lock node's clock against the harness clock (`clock-offset` with `node`): the
 * MONITOR time stamps the replay reads are the node's, the claims it checks them against are the
 * clients', and the clients' own handshake only compares them with the harness. Best of a few
 * `TIME` round trips straight to the redis-server; a node that does not answer (killed by the
 * schedule) is skipped.
 */
export async function recordNodeClocks(
  nodes: readonly { redisPort: number }[],
  emit: (e: HistoryEvent) => void,
): Promise<void> {
  await Promise.all(
    nodes.map(async (node, i) => {
      const redis = directConnection(node.redisPort, { connectTimeout: 500, commandTimeout: 500 });
      try {
        await redis.connect();
        let best: { offsetMs: number; uncertaintyMs: number } | undefined;
        for (let k = 0; k < 10; k++) {
          const sentAt = harnessNow();
          const [sec, usec] = await redis.time();
          const receivedAt = harnessNow();
          const estimate = {
            offsetMs: Number(sec) * 1000 + Number(usec) / 1000 - (sentAt + receivedAt) / 2,
            uncertaintyMs: (receivedAt - sentAt) / 2,
          };
          if (!best || estimate.uncertaintyMs < best.uncertaintyMs) best = estimate;
        }
        if (best)
          emit({ t: harnessNow(), process: "harness", type: "info", f: "clock-offset", data: { node: i, ...best } });
      } catch {
        // a node killed by the schedule: no clock to read
      } finally {
        redis.disconnect();
      }
    }),
  );
}

/** A connection straight to a redis-server that fails at once instead of retrying: the node may be down. */
function directConnection(port: number, timeouts: { connectTimeout?: number; commandTimeout?: number } = {}): Redis {
  const redis = new Redis({
    host: "127.0.0.1",
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    ...timeouts,
  });
  redis.on("error", () => {});
  return redis;
}

/** Records the lock keys left on the nodes after every client finished, and their longest PTTL. */
export async function scanLeftovers(
  nodes: readonly { redisPort: number }[],
  keyPrefix: string,
  emit: (e: HistoryEvent) => void,
): Promise<void> {
  let keys = 0;
  let maxPttlMs = 0;
  for (const node of nodes) {
    const redis = directConnection(node.redisPort);
    try {
      await redis.connect();
      for (const key of await redis.keys(`${keyPrefix}*`)) {
        keys++;
        maxPttlMs = Math.max(maxPttlMs, await redis.pttl(key));
      }
    } catch {
      // a node killed by the schedule: nothing left on it
    } finally {
      redis.disconnect();
    }
  }
  emit({ t: harnessNow(), process: "harness", type: "info", f: "leftover-keys", data: { keys, maxPttlMs } });
}
