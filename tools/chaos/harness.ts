/**
 * Runs one scenario end to end: real nodes (tools/nodes), the fault proxy, MONITOR audits, a
 * separate resource redis for the protected counters, client processes, and the nemesis or a
 * fixed driver. Collects one history, checks it, and tears everything down by PID.
 * @module
 */
import { gateIndex } from "../../src/waiting/gate.js";
import { type NodeCluster, startNodes } from "../nodes/index.js";
import type { ClientBuild } from "./build.js";
import { type AnomalyCounts, anomalyCounts, type CheckResults, checkHistory } from "./checkers/index.js";
import { type ClientProcess, type ForkedClient, type ForkPool, forkClient } from "./clients.js";
import { harnessNow } from "./clock.js";
import type { DriverContext } from "./drivers.js";
import {
  failOver,
  initializeFencingOn,
  recordNodeClocks,
  refresh,
  type SharedNodes,
  scanLeftovers,
  startReplica,
} from "./harness-nodes.js";
import type { FaultEvent, HistoryEvent } from "./history.js";
import { startMonitors } from "./monitor.js";
import { drawSchedule, type NemesisContext, runSchedule, sleep } from "./nemesis.js";
import type { ClientConfig, StaleToken } from "./protocol.js";
import { startFaultProxy } from "./proxy.js";
import { createRng } from "./rng.js";
import type { Scenario } from "./scenarios.js";
import type { TcpRelay } from "./tcp-relay.js";

export { type SharedNodes, startSharedNodes } from "./harness-nodes.js";

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

/** The history tag of the second cluster's resources (see `TwinCluster` in protocol.ts). */
const TWIN_TAG = "twin/";

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
  const clientCount = scenario.driver
    ? (scenario.driverClients ?? options.processes)
    : (scenario.hotKey?.processes ?? options.processes);
  // Workers per process: the random workload spreads its workers over the processes.
  const workerCount = scenario.hotKey?.workers ?? options.clients;
  const workersOf = (index: number) =>
    scenario.driver
      ? (scenario.driverWorkers ?? 1)
      : Math.floor(workerCount / clientCount) + (index < workerCount % clientCount ? 1 : 0);
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
    // Two clusters with equal node ids: a second one of as many nodes, for this scenario alone.
    let twinNodes: NodeCluster["nodes"] = [];
    if (scenario.equalIds) {
      const twin = await startNodes({ count: scenario.nodes });
      cleanups.push(() => twin.stop());
      notePids(twin);
      twinNodes = twin.nodes;
    }
    let relay: TcpRelay | undefined;
    if (scenario.replicated) {
      relay = await startReplica(cluster);
      const r = relay;
      cleanups.push(() => r.close());
    }

    // The second cluster's nodes follow the first's, in the proxy, the MONITORs and the audits.
    const allNodes = [...lockNodes, ...twinNodes];
    const proxy = await startFaultProxy(
      allNodes.map((n) => n.url),
      seed,
    );
    cleanups.push(() => proxy.close());
    const keyPrefix = keyPrefixOf(scenario);
    if (scenario.fencing) await initializeFencingOn(lockNodes);
    const resources = scenario.targets
      ? scenario.targets(keyPrefix)
      : scenario.hotKey
        ? [`${keyPrefix}hot`]
        : [`${keyPrefix}r0`, `${keyPrefix}r1`];
    const extraKeys = new Set(resources.flat().filter((r) => !r.startsWith(keyPrefix)));
    const monitors = await startMonitors({
      ports: allNodes.map((n) => n.redisPort),
      keyPrefix,
      emit,
      ...(extraKeys.size > 0 ? { extraKeys } : {}),
      ...(twinNodes.length > 0 ? { keyTags: allNodes.map((_, i) => (i < lockNodes.length ? "" : TWIN_TAG)) } : {}),
    });
    cleanups.push(() => monitors.close());
    await recordNodeClocks(allNodes, emit);

    // Tokens the workers share after a release: the last one of each resource set (the drivers
    // misuse it by token), and, when the scenario asks for it, each is handed to another process.
    const tokens = new Map<string, StaleToken>();
    const tokenRng = rng.fork("stale-tokens");
    const onToken = (stale: StaleToken) => {
      tokens.set(stale.tag + JSON.stringify(stale.resources), stale);
      if (scenario.driver || !scenario.misuse?.staleToken) return;
      const sender = stale.from.split(".")[0];
      const others = clients.filter((c) => c.alive() && (clients.length === 1 || c.id !== sender));
      if (others.length > 0) tokenRng.pick(others).stale(stale);
    };
    let nextClient = 0;
    const configFor = (index: number): ClientConfig => ({
      id: `c${index}`,
      workers: Math.max(1, workersOf(index)),
      nodes: lockNodes.map((n, i) => ({ url: proxy.urlFor(i, `c${index}`), token: n.token })),
      ...(twinNodes.length > 0
        ? {
            nodeIds: lockNodes.map((_, i) => `node-${i + 1}`),
            twin: {
              nodes: twinNodes.map((n, i) => ({
                url: proxy.urlFor(lockNodes.length + i, `c${index}`),
                token: n.token,
              })),
              redisPorts: twinNodes.map((n) => n.redisPort),
              tag: TWIN_TAG,
              nodeOffset: lockNodes.length,
            },
          }
        : {}),
      ...(scenario.misuse ? { misuse: scenario.misuse } : {}),
      ...(scenario.primitive ? { primitive: scenario.primitive } : {}),
      ...(scenario.targets ? { targetsInTurn: true } : {}),
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
      const client = await f.init(configFor(nextClient++), emit, onToken);
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
        lastToken: (resources, tag = "") => tokens.get(tag + JSON.stringify([resources].flat().sort())),
        twinTag: TWIN_TAG,
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
        ...(scenario.hotKey ? { targetNode: gateIndex([resources[0] ?? ""].flat(), scenario.nodes) } : {}),
      });
      const startedAt = harnessNow();
      const calmMs = scenario.hotKey?.calmStartMs ?? 0;
      workloadUntil = startedAt + calmMs + options.durationMs;
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
      await runSchedule(nemesis, schedule, startedAt + calmMs, workloadUntil);
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
    await scanLeftovers(scenario.replicated ? cluster.nodes.slice(0, 2) : allNodes, keyPrefix, emit);
    await recordNodeClocks(allNodes, emit);
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

/** Whether the anomalies are what the scenario expects. */
export function verdictOf(scenario: Scenario, a: AnomalyCounts): { pass: boolean; reasons: string[] } {
  const reasons: string[] = [];
  if (scenario.kind === "safe") {
    if (a.overlap > 0) reasons.push(`C1 found ${a.overlap} overlapping grants`);
    if (a.overClaim > 0) reasons.push(`C2 found ${a.overClaim} over-claims`);
    if (a.foreignTouch > 0) reasons.push(`C3 found ${a.foreignTouch} foreign touches`);
    if (a.overPermits > 0) reasons.push(`C6 found ${a.overPermits} semaphores over their permits`);
    if (a.readWrite > 0) reasons.push(`C7 found ${a.readWrite} write windows beside another`);
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
