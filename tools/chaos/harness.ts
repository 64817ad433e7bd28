/**
 * Runs one scenario end to end: real nodes (tools/nodes), the fault proxy, MONITOR audits, a
 * separate resource redis for the protected counters, client processes, and the nemesis or a
 * fixed driver. Collects one history, checks it, and tears everything down by PID.
 * @module
 */
import { Redis } from "ioredis";
import { gateIndex } from "../../src/gate.js";
import { FencingError, Redlock } from "../../src/index.js";
import { type NodeCluster, startNodes } from "../nodes/index.js";
import type { ClientBuild } from "./build.js";
import { type AnomalyCounts, anomalyCounts, type CheckResults, checkHistory } from "./checkers/index.js";
import { type ClientProcess, type ForkedClient, type ForkPool, forkClient } from "./clients.js";
import { harnessNow } from "./clock.js";
import type { DriverContext } from "./drivers.js";
import type { FaultEvent, HistoryEvent } from "./history.js";
import { startMonitors } from "./monitor.js";
import { drawSchedule, type NemesisContext, runSchedule, sleep } from "./nemesis.js";
import type { ClientConfig } from "./protocol.js";
import { startFaultProxy } from "./proxy.js";
import { createRng } from "./rng.js";
import type { Scenario } from "./scenarios.js";
import { startTcpRelay, type TcpRelay } from "./tcp-relay.js";

/** Options of one run of a scenario. */
export interface RunOptions {
  readonly seed: number;
  /** Workload duration of a random scenario, ms (driven scenarios take the time their schedule takes). */
  readonly durationMs: number;
  /** Client processes of a random scenario. */
  readonly processes: number;
  /** Concurrent lock workers of a random scenario, spread over the processes (at least one each). */
  readonly clients: number;
  /** Client bundles by variant. */
  readonly builds: (variant: Scenario["build"]) => Promise<ClientBuild>;
  /** Progress lines. */
  readonly log?: (line: string) => void;
  /** Nodes to reuse instead of starting new ones (not for the replicated scenario). */
  readonly shared?: SharedNodes | undefined;
  /** Client processes forked ahead of time (default: forked when needed). */
  readonly forks?: ForkPool | undefined;
}

/** The outcome of one scenario. */
export interface ScenarioResult {
  readonly scenario: Scenario;
  readonly seed: number;
  readonly durationMs: number;
  readonly history: readonly HistoryEvent[];
  readonly checks: CheckResults;
  readonly anomalies: AnomalyCounts;
  /** Faults injected, by kind. */
  readonly faults: Readonly<Record<string, number>>;
  /** Client operations (acquire, extend, release, read, write) that completed or failed. */
  readonly operations: number;
  /** PIDs of every process the scenario started (clients, its own redis-servers): all gone once it returns. */
  readonly pids: readonly number[];
  /** Whether the scenario met its expectation (safe: clean; control: its checkers fired). */
  readonly verdict: { readonly pass: boolean; readonly reasons: readonly string[] };
}

/** Lock keys of a scenario: its own prefix, so nothing of an earlier scenario on shared nodes counts. */
const keyPrefixOf = (scenario: Scenario) => `chaos:${scenario.name}:`;

/** How long the end of a run waits for the nodes' MONITOR streams to catch up, ms. */
const MONITOR_DRAIN_TIMEOUT_MS = 15_000;

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
async function refresh(cluster: NodeCluster): Promise<void> {
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

/** Runs one scenario. */
export async function runScenario(scenario: Scenario, options: RunOptions): Promise<ScenarioResult> {
  const log = options.log ?? (() => {});
  const history: HistoryEvent[] = [];
  const emit = (event: HistoryEvent) => void history.push(event);
  const seed = options.seed;
  const rng = createRng(seed).fork(scenario.name);
  const build = await options.builds(scenario.build);
  const started = harnessNow();
  emit({
    t: started,
    process: "harness",
    type: "info",
    f: "run-start",
    data: {
      scenario: scenario.name,
      seed,
      nodes: scenario.nodes,
      quorum: scenario.quorum,
      ttlMs: scenario.ttlMs,
      build: scenario.build,
      brokenClock: scenario.brokenClock === true,
    },
  });

  const cleanups: (() => Promise<void> | void)[] = [];
  const clients: ClientProcess[] = [];
  const pids = new Set<number>();
  const clientCount = scenario.driver ? (scenario.driverClients ?? options.processes) : options.processes;
  // Workers per process: the random workload spreads its workers over the processes.
  const workerCount = scenario.hotKey?.workers ?? options.clients;
  const workersOf = (index: number) =>
    scenario.driver ? 1 : Math.floor(workerCount / clientCount) + (index < workerCount % clientCount ? 1 : 0);
  // Fork the clients first: they load the bundle while the nodes start.
  const forked: ForkedClient[] = [];
  const forkOne = () => {
    const f = options.forks ? options.forks.take(build.file) : forkClient(build.file);
    forked.push(f);
    pids.add(f.pid);
    return f;
  };
  const warm = Array.from({ length: clientCount }, forkOne);
  cleanups.push(() => {
    for (const f of forked) if (!clients.some((c) => c.pid === f.pid)) f.kill();
  });
  try {
    // Lock nodes (a master and its replica for the failover control) and the resource store.
    const notePids = (c: NodeCluster) => {
      for (const n of c.nodes) pids.add(n.pid);
    };
    const shared =
      options.shared && !scenario.replicated && options.shared.cluster.nodes.length === scenario.nodes
        ? options.shared
        : undefined;
    let cluster: NodeCluster;
    let store: NodeCluster;
    if (shared) {
      cluster = shared.cluster;
      store = shared.store;
      await Promise.all([refresh(cluster), refresh(store)]);
    } else {
      cluster = await startNodes({ count: scenario.replicated ? 2 : scenario.nodes });
      const own = cluster;
      cleanups.push(() => own.stop());
      cleanups.push(() => notePids(own));
      notePids(own);
      store = await startNodes({ count: 1 });
      const ownStore = store;
      cleanups.push(() => ownStore.stop());
      notePids(ownStore);
    }
    const lockNodes = cluster.nodes.slice(0, scenario.nodes);
    let relay: TcpRelay | undefined;
    if (scenario.replicated) {
      relay = await startReplica(cluster);
      const r = relay;
      cleanups.push(() => r.close());
    }

    const proxy = await startFaultProxy(
      lockNodes.map((n) => n.url),
      seed,
    );
    cleanups.push(() => proxy.close());
    const keyPrefix = keyPrefixOf(scenario);
    if (scenario.fencing) await initializeFencingOn(lockNodes);
    const monitors = await startMonitors({ ports: lockNodes.map((n) => n.redisPort), keyPrefix, emit });
    cleanups.push(() => monitors.close());
    await recordNodeClocks(lockNodes, emit);

    const resources = scenario.hotKey ? [`${keyPrefix}hot`] : [`${keyPrefix}r0`, `${keyPrefix}r1`];
    let nextClient = 0;
    const configFor = (index: number): ClientConfig => ({
      id: `c${index}`,
      workers: Math.max(1, workersOf(index)),
      nodes: lockNodes.map((n, i) => ({ url: proxy.urlFor(i, `c${index}`), token: n.token })),
      redisPorts: lockNodes.map((n) => n.redisPort),
      resourcePort: store.nodes[0]?.redisPort as number,
      quorum: scenario.quorum,
      ttlMs: scenario.ttlMs,
      // Generous against a loaded machine, still small against the TTL.
      requestTimeoutMs: Math.min(1000, Math.floor(scenario.ttlMs / 4)),
      maxAttempts: 5,
      resources,
      extendProbability: 0.3,
      workMs: 50,
      thinkMs: 50,
      seed,
      brokenClock: scenario.brokenClock === true,
      fenced: true,
      fencing: scenario.fencing === true,
    });
    const spawn = async (f: ForkedClient = forkOne()) => {
      const client = await f.init(configFor(nextClient++), emit);
      clients.push(client);
      return client;
    };
    await Promise.all(warm.map((f) => spawn(f)));
    clients.sort((a, b) => Number(a.id.slice(1)) - Number(b.id.slice(1)));
    cleanups.push(async () => {
      await Promise.all(clients.map((c) => c.stop()));
    });

    let workloadUntil = harnessNow() + options.durationMs;
    if (scenario.driver) {
      const ctx: DriverContext = {
        clients,
        cluster,
        proxy,
        monitors,
        nodes: scenario.nodes,
        quorum: scenario.quorum,
        ttlMs: scenario.ttlMs,
        keyPrefix,
        emit,
        ...(relay
          ? {
              failover: {
                blockReplication: () => relay?.block(),
                failOver: () => failOver(cluster, proxy, monitors),
              },
            }
          : {}),
      };
      log(`  ${scenario.name}: driving the schedule`);
      await scenario.driver(ctx);
      workloadUntil = harnessNow();
    } else {
      const schedule = drawSchedule(rng.fork("nemesis"), {
        kinds: scenario.faults ?? [],
        durationMs: options.durationMs,
        nodes: scenario.nodes,
        clients: clients.map((c) => c.id),
        quorum: scenario.quorum,
        ttlMs: scenario.ttlMs,
        // The clients' keys are the resources (no key prefix), so this is the node they wait at.
        ...(scenario.hotKey ? { targetNode: gateIndex(resources, scenario.nodes) } : {}),
      });
      const startedAt = harnessNow();
      workloadUntil = startedAt + options.durationMs;
      for (const c of clients) c.run(workloadUntil);
      const nemesis: NemesisContext = {
        cluster,
        proxy,
        monitors,
        ttlMs: scenario.ttlMs,
        keyPrefix,
        clients: () => clients,
        async replaceClient(victim) {
          await victim.kill();
          const replacement = await spawn();
          replacement.run(workloadUntil);
        },
        emit,
      };
      log(`  ${scenario.name}: ${clients.length} clients, ${schedule.length} faults scheduled`);
      await runSchedule(nemesis, schedule, startedAt, workloadUntil);
      const left = workloadUntil - harnessNow();
      if (left > 0) await sleep(left);
    }

    // Let clients finish their operation, release, and settle their background cleanup.
    await Promise.all(clients.map((c) => c.stop()));
    emit({
      t: harnessNow(),
      process: "harness",
      type: "info",
      f: "run-end",
      data: { workloadMs: workloadUntil - started },
    });
    await scanLeftovers(cluster, scenario, keyPrefix, emit);
    await recordNodeClocks(lockNodes, emit);
    // MONITOR lines trail the commands: wait until every stream shows a marker sent now. A stream
    // read short of its end (the fixed 100 ms pause this replaces, on a loaded machine) lacks the
    // last grants' writes, which checker 2's log half reads as keys the nodes never held: false
    // over-claims. One that does not catch up fails the run instead.
    await monitors.drain(MONITOR_DRAIN_TIMEOUT_MS);
  } finally {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch (error) {
        log(`  cleanup failed: ${(error as Error).message}`);
      }
    }
  }

  const checks = checkHistory(history, {
    nodes: scenario.nodes,
    quorum: scenario.quorum,
    maxTtlMs: scenario.ttlMs * 4,
  });
  const anomalies = anomalyCounts(checks);
  const faults: Record<string, number> = {};
  for (const e of history) {
    if (e.f === "fault-start") {
      const kind = (e as FaultEvent).fault.kind;
      faults[kind] = (faults[kind] ?? 0) + 1;
    }
  }
  const operations = history.filter(
    (e) => (e.type === "ok" || e.type === "fail") && ["acquire", "extend", "release", "read", "write"].includes(e.f),
  ).length;
  return {
    scenario,
    seed,
    durationMs: harnessNow() - started,
    history,
    checks,
    anomalies,
    faults,
    operations,
    pids: [...pids],
    verdict: verdictOf(scenario, anomalies),
  };
}

/**
 * Mark the lock nodes for fencing, once per fenced scenario (the nodes are flushed between
 * scenarios). A refusal because a marker is already there is fine: they are marked.
 */
async function initializeFencingOn(nodes: readonly { url: string; token: string }[]): Promise<void> {
  const redlock = new Redlock({ nodes: nodes.map(({ url, token }) => ({ url, token })) });
  try {
    await redlock.initializeFencing();
  } catch (error) {
    if (!(error instanceof FencingError && error.code === "FENCING_INIT_REFUSED")) throw error;
  }
}

/** Whether the anomalies are what the scenario expects. */
export function verdictOf(scenario: Scenario, a: AnomalyCounts): { pass: boolean; reasons: string[] } {
  const reasons: string[] = [];
  if (scenario.kind === "safe") {
    if (a.overlap > 0) reasons.push(`C1 found ${a.overlap} overlapping grants`);
    if (a.overClaim > 0) reasons.push(`C2 found ${a.overClaim} over-claims`);
    if (a.foreignTouch > 0) reasons.push(`C3 found ${a.foreignTouch} foreign touches`);
    if (a.lostFenced !== null && a.lostFenced > 0)
      reasons.push(`C4 found ${a.lostFenced} lost updates on the fenced counter`);
  } else {
    // A fenced control: whatever the unfenced counter lost, the fenced one must lose nothing.
    if (scenario.fencing && a.lostFenced !== 0) {
      reasons.push(
        a.lostFenced === null
          ? "the fenced counter did not run (no lock.fence)"
          : `C4 found ${a.lostFenced} lost updates on the fenced counter`,
      );
    }
    for (const checker of scenario.mustFire ?? []) {
      const count = a[checker];
      if (count === null || count === 0) {
        reasons.push(
          scenario.kind === "finding"
            ? `${checker} no longer fires: the finding is fixed? make ${scenario.name} a safe scenario`
            : `${checker} did not fire`,
        );
      }
    }
  }
  return { pass: reasons.length === 0, reasons };
}

/** Node 1 becomes a replica of node 0 through a relay, and the harness waits for the initial sync. */
async function startReplica(cluster: NodeCluster): Promise<TcpRelay> {
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
async function failOver(
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
async function recordNodeClocks(
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
async function scanLeftovers(
  cluster: NodeCluster,
  scenario: Scenario,
  keyPrefix: string,
  emit: (e: HistoryEvent) => void,
) {
  let keys = 0;
  let maxPttlMs = 0;
  for (const node of cluster.nodes.slice(0, scenario.replicated ? 2 : scenario.nodes)) {
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
