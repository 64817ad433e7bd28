/**
 * Part 6: the hot key. C clients (each its own client instance) loop acquire → critical section
 * (two REST round trips to the data node) → release on one key for a fixed window. Clients run in
 * one client process, or spread over several; the coordinator only starts them and reads the
 * servers' request counts at the window's edges.
 */
import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { BenchContext, Chart, PartResult, Table } from "../context.js";
import { emptyPart } from "../context.js";
import { exited, forkTs } from "../fork.js";
import type { ClientResult, HotKeyConfig } from "../hotkey-clients.js";
import type { WorkerReply, WorkerRequest } from "../hotkey-protocol.js";
import type { ServerCounts } from "../node-host-protocol.js";
import { restCommand, restPipeline } from "../raw.js";
import { fmt, jainIndex, median, quantile, ratio } from "../stats.js";
import { floorRest, floorTcp } from "../subjects.js";
import { lineChart } from "../svg.js";
import { SYSTEMS, type SystemSpec, specLabel } from "../systems.js";

const WORKER = fileURLToPath(new URL("../hotkey-worker.ts", import.meta.url));
const TTL_MS = 10_000;
const GRACE_MS = 200;

interface DelayModel {
  name: string;
  fixedMs: number;
  jitterMs: number;
}

/** One run's figures. */
export interface HotRun {
  label: string;
  spec: SystemSpec;
  delay: string;
  c: number;
  processes: number;
  windowS: number;
  handoffsPerS: number;
  attemptsPerHandoff: number;
  requestsPerHandoff: number;
  requestUnit: "HTTP" | "cmd" | "–";
  waitP50: number;
  waitP99: number;
  jain: number;
  starved: number;
  gaveUp: number;
  errors: number;
  lostUpdates: number;
  overlaps: number;
  efficiency: number;
  /** The ideal cycle the efficiency is counted against (floor acquire + release + critical section), ms. */
  idealCycleMs: number;
  /** Commands the lock nodes processed per handoff, by name. */
  commandsPerHandoff: Record<string, number>;
  firstError?: string;
}

let serial = 0;

/**
 * One client process forked ahead of time (while the previous run's grace period passes), so a
 * run does not wait for tsx to start. Killed at the end of the part.
 */
let spare: ChildProcess | undefined;

function takeWorker(): ChildProcess {
  const worker = spare && spare.exitCode === null && spare.connected ? spare : forkTs(WORKER);
  spare = undefined;
  return worker;
}

function forkSpare(): void {
  spare ??= forkTs(WORKER);
}

async function dropSpare(): Promise<void> {
  const worker = spare;
  spare = undefined;
  if (worker && worker.exitCode === null) {
    worker.kill("SIGKILL");
    await exited(worker);
  }
}

/** Runs `spec` with `c` clients spread over `processes` client processes for `windowMs`. */
export async function runHotKey(
  ctx: BenchContext,
  spec: SystemSpec,
  c: number,
  processes: number,
  windowMs: number,
  delay: string,
  idealCycleMs: number,
): Promise<HotRun> {
  const id = `hot:${process.pid}:${Date.now().toString(36)}:${serial++}`;
  const base: HotKeyConfig = {
    spec,
    backend: { kind: "servers", nodes: [...ctx.host.nodes] },
    data: ctx.host.data,
    clients: 0,
    key: id,
    counterKey: `${id}:counter`,
    holdersKey: `${id}:holders`,
    ttlMs: TTL_MS,
  };
  const shares = Array.from(
    { length: processes },
    (_, i) => Math.floor(c / processes) + (i < c % processes ? 1 : 0),
  ).filter((k) => k > 0);
  const workers = shares.map(() => takeWorker());
  try {
    const replies = workers.map((worker) => nextReply(worker));
    workers.forEach((worker, i) => {
      worker.send({ type: "prepare", config: { ...base, clients: shares[i]! } } satisfies WorkerRequest);
    });
    for (const reply of await Promise.all(replies)) if (reply.type !== "ready") throw new Error(describe(reply));
    const startAt = Date.now() + 100;
    const results = workers.map((worker) => nextReply(worker));
    for (const worker of workers)
      worker.send({ type: "go", startAt, windowMs, graceMs: GRACE_MS } satisfies WorkerRequest);
    const at = (time: number) =>
      new Promise<ServerCounts>((resolve, reject) =>
        setTimeout(() => ctx.host.counts().then(resolve, reject), Math.max(0, time - Date.now())),
      );
    const [before, after] = await Promise.all([at(startAt), at(startAt + windowMs)]);
    forkSpare();
    const clients: ClientResult[] = [];
    for (const reply of await Promise.all(results)) {
      if (reply.type !== "results") throw new Error(describe(reply));
      clients.push(...reply.results);
    }
    await Promise.all(workers.map(exited));
    const counter = Number((await restCommand(ctx.host.data, ["GET", base.counterKey])) ?? 0);
    return summarise(spec, c, processes, windowMs, delay, idealCycleMs, clients, counter, before, after);
  } finally {
    for (const worker of workers) if (worker.exitCode === null) worker.kill("SIGKILL");
    await Promise.all(workers.map(exited));
  }
}

function nextReply(worker: ChildProcess): Promise<WorkerReply> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`client process exited early (code ${code})`));
    worker.once("exit", onExit);
    worker.once("message", (message: WorkerReply) => {
      worker.off("exit", onExit);
      resolve(message);
    });
  });
}

function describe(reply: WorkerReply): string {
  return reply.type === "failed" ? `client process failed: ${reply.error}` : `unexpected reply ${reply.type}`;
}

function summarise(
  spec: SystemSpec,
  c: number,
  processes: number,
  windowMs: number,
  delay: string,
  idealCycleMs: number,
  clients: ClientResult[],
  counter: number,
  before: ServerCounts,
  after: ServerCounts,
): HotRun {
  const handoffs = clients.reduce((a, r) => a + r.handoffs, 0);
  const sections = clients.reduce((a, r) => a + r.sections, 0);
  const attempts = clients.reduce((a, r) => a + r.attempts, 0);
  const transport = SYSTEMS[spec.id].transport;
  const delta = (a: number[], b: number[]) => b.reduce((sum, v, i) => sum + v - (a[i] ?? 0), 0);
  const requests =
    transport === "REST" ? delta(before.http, after.http) : transport === "TCP" ? delta(before.tcp, after.tcp) : 0;
  const waits = clients.flatMap((r) => r.waits);
  const windowS = windowMs / 1000;
  const handoffsPerS = handoffs / windowS;
  const firstError = clients.find((r) => r.firstError)?.firstError;
  const commandsPerHandoff: Record<string, number> = {};
  const [from, to] =
    transport === "TCP" ? [before.tcpByCommand, after.tcpByCommand] : [before.restByCommand, after.restByCommand];
  for (const [name, n] of Object.entries(to)) {
    const count = n - (from[name] ?? 0);
    if (count > 0) commandsPerHandoff[name] = count / handoffs;
  }
  return {
    label: specLabel(spec),
    spec,
    delay,
    c,
    processes,
    windowS,
    handoffsPerS,
    attemptsPerHandoff: attempts / handoffs,
    requestsPerHandoff: transport === "none" ? Number.NaN : requests / handoffs,
    requestUnit: transport === "REST" ? "HTTP" : transport === "TCP" ? "cmd" : "–",
    waitP50: median(waits),
    waitP99: quantile(waits, 0.99),
    jain: jainIndex(clients.map((r) => r.handoffs)),
    starved: clients.filter((r) => r.handoffs === 0).length,
    gaveUp: clients.reduce((a, r) => a + r.gaveUp, 0),
    errors: clients.reduce((a, r) => a + r.errors, 0),
    // A section counts once its SET was acknowledged, so the counter can only fall short by lost updates.
    lostUpdates: Math.max(0, sections - counter),
    overlaps: clients.reduce((a, r) => a + r.overlaps, 0),
    efficiency: handoffsPerS / (1000 / idealCycleMs),
    idealCycleMs,
    commandsPerHandoff,
    ...(firstError ? { firstError } : {}),
  };
}

/** The ideal cycle: floor acquire + release of the transport, plus the critical section's two round trips. */
async function idealCycle(ctx: BenchContext, transport: "REST" | "TCP", n: number, runs: number): Promise<number> {
  const floor = transport === "REST" ? floorRest(ctx.host.nodes, n) : await floorTcp(ctx.host.nodes, n);
  const floorRuns: number[] = [];
  const sectionRuns: number[] = [];
  for (let i = 0; i < runs + 1; i++) {
    let t = performance.now();
    await floor.once(`ideal:${transport}:${n}:${process.pid}:${serial++}`);
    const f = performance.now() - t;
    t = performance.now();
    await restPipeline(ctx.host.data, [
      ["INCR", "ideal:h"],
      ["GET", "ideal:c"],
    ]);
    await restPipeline(ctx.host.data, [
      ["SET", "ideal:c", 1],
      ["DECR", "ideal:h"],
    ]);
    if (i > 0) {
      floorRuns.push(f);
      sectionRuns.push(performance.now() - t);
    }
  }
  await floor.close();
  return median(floorRuns) + median(sectionRuns);
}

interface HotKeyPlan {
  models: DelayModel[];
  /** Systems and client counts per delay model. */
  grid: (model: DelayModel) => { cs: number[]; specs: SystemSpec[] };
  windowMs: number;
  processSpecs: SystemSpec[];
  processCs: number[];
  processes: number;
  fairness?: { c: number; windowMs: number; specs: SystemSpec[] };
  n: number;
}

function plan(ctx: BenchContext): HotKeyPlan {
  const { smoke, quick, durationS } = ctx.options;
  const n = smoke ? 3 : 5;
  const all: SystemSpec[] = [
    { id: "edge-redlock", policy: "equal", n },
    { id: "edge-redlock", policy: "defaults", n },
    { id: "upstash-lock", policy: "equal", n },
    { id: "sesame-redlock", policy: "equal", n },
    { id: "redlock-universal", policy: "equal", n },
    { id: "upstash-lock", policy: "defaults", n },
    { id: "sesame-redlock", policy: "defaults", n },
    { id: "redlock-universal", policy: "defaults", n },
  ];
  const equal = all.slice(0, 5);
  if (smoke) {
    return {
      models: [{ name: "+5 ms", fixedMs: 5, jitterMs: 0 }],
      grid: () => ({ cs: [4], specs: equal }),
      windowMs: 1000,
      processSpecs: [all[1]!],
      processCs: [4],
      processes: 2,
      n,
    };
  }
  const fixed: DelayModel = { name: "+20 ms", fixedMs: 20, jitterMs: 0 };
  const jitter: DelayModel = { name: "+20 ms, jitter 0–20 ms", fixedMs: 20, jitterMs: 20 };
  return {
    models: [fixed, jitter],
    grid: (model) =>
      quick
        ? { cs: model === fixed ? [8, 32] : [32], specs: equal }
        : { cs: [8, 32, 64], specs: model === fixed ? all : equal },
    windowMs: durationS * 1000,
    processSpecs: quick ? [all[1]!] : all.slice(0, 3),
    processCs: [32],
    processes: 4,
    // The long window also runs the peers that lead at C = 32 (and @upstash/lock for requests):
    // there the line has formed, and the rate compares steady states rather than start-ups.
    fairness: {
      c: 32,
      windowMs: quick ? 6_000 : 30_000,
      specs: quick ? [all[1]!] : [...all.slice(0, 3), all[4]!, all[6]!],
    },
    n,
  };
}

const NEGATIVE: SystemSpec = { id: "no-lock", policy: "defaults", n: 0 };

export async function hotKeyPart(ctx: BenchContext): Promise<PartResult> {
  const part = emptyPart("hotkey", "Hot key");
  const s = plan(ctx);
  part.method.push(
    `C clients, each its own client instance, loop acquire (TTL ${TTL_MS / 1000} s) → critical section → release on one key for ${s.windowMs / 1000} s per run. N = ${s.n} lock nodes (@upstash/lock: one). edge-redlock's clients in one process share what the library knows of the key's contention, as every client of the same nodes in one isolate does; the runs over 4 processes show clients that share nothing across processes.`,
    "Critical section: two REST round trips to a separate data node (same delay, no jitter): `INCR holders` + `GET counter`, then `SET counter+1` + `DECR holders`. holders > 1 counts an overlapping hold; a final counter below the acknowledged sections counts lost updates.",
    "Handoffs: sections released inside the window. Requests per handoff: requests the lock nodes received during the window (HTTP requests counted at the bridges for REST systems, commands counted at the TCP proxies for TCP systems) ÷ handoffs. Attempts: counted on the client by wrapping each library's per-attempt step.",
    "Wait: from wanting the lock to holding it (across give-ups). Jain: fairness of per-client handoffs (1 = equal). Starved: clients with no handoff. Gave up: acquire() calls that ran out of retries (the client then calls acquire again).",
    "Efficiency: handoffs/s ÷ ideal rate, ideal = 1 / (floor acquire + release of the system's transport and N + the two critical-section round trips), measured just before under the same delays.",
    `Clients run in a client process of their own ("1 process"), or spread over ${s.processes} processes; a process is ended ${GRACE_MS} ms after the window, so retries still in flight cannot spill into the next run.`,
    "Equal policy: 10 attempts, a fixed 100 ms apart, for every system. Defaults: each system's own (see the systems table).",
    "Long window: C = 32 for 30 s, for edge-redlock (both policies), @upstash/lock and redlock-universal (equal policy) and @sesamecare-oss/redlock (its defaults, the fastest peer at C = 32 in the 3 s runs): fairness, and the rate once a line has formed.",
    "÷ best peer: edge-redlock's handoffs/s over the highest of the three peers (either policy) in the same delay, C and process layout. ÷ @upstash/lock: edge-redlock's requests per handoff over @upstash/lock's with the same policy.",
  );
  const runs: HotRun[] = [];
  const rounds = ctx.options.smoke ? 1 : ctx.options.hotRounds;
  if (rounds > 1) {
    part.method.push(
      `Each run of the main grid is repeated in ${rounds} interleaved rounds (the system order rotates); rates, ratios and waits are medians over the rounds, lost updates and overlapping holds their sums. The multi-process and long-window runs are made once.`,
    );
  }
  try {
    for (let round = 0; round < rounds; round++)
      for (const model of s.models) {
        await ctx.host.setUniformDelay(model.fixedMs, model.jitterMs);
        let rotation = round;
        const grid = s.grid(model);
        let idealFor: (spec: SystemSpec) => number = () => Number.NaN;
        const idealByC = new Map<number, (spec: SystemSpec) => number>();
        for (const c of grid.cs) {
          const order = grid.specs.map((_, i) => grid.specs[(i + rotation) % grid.specs.length]!);
          rotation++;
          // Measured again for every group: on a shared machine the floor moves with the load.
          const ideals = {
            REST: await idealCycle(ctx, "REST", s.n, 8),
            TCP: await idealCycle(ctx, "TCP", s.n, 8),
            REST1: await idealCycle(ctx, "REST", 1, 8),
          };
          idealFor = (spec: SystemSpec) =>
            spec.id === "upstash-lock" ? ideals.REST1 : SYSTEMS[spec.id].transport === "TCP" ? ideals.TCP : ideals.REST;
          idealByC.set(c, idealFor);
          part.notes.push(
            `${rounds > 1 ? `round ${round + 1}, ` : ""}${model.name}, C = ${c}: ideal cycle ${fmt(ideals.REST)} ms (REST, N=${s.n}), ${fmt(ideals.TCP)} ms (TCP, N=${s.n}), ${fmt(ideals.REST1)} ms (REST, N=1).`,
          );
          for (const spec of order) {
            ctx.log(`  hot key ${rounds > 1 ? `round ${round + 1} ` : ""}${model.name} C=${c} ${specLabel(spec)}`);
            runs.push(await runHotKey(ctx, spec, c, 1, s.windowMs, model.name, idealFor(spec)));
          }
          if (c === grid.cs[0] && model === s.models[0] && round === 0) {
            ctx.log(`  hot key ${model.name} C=${c} negative control`);
            runs.push(await runHotKey(ctx, NEGATIVE, c, 1, s.windowMs, model.name, ideals.REST));
          }
        }
        if (model === s.models[0] && round === 0) {
          for (const c of s.processCs) {
            for (const spec of s.processSpecs) {
              ctx.log(`  hot key ${model.name} C=${c} ${specLabel(spec)} in ${s.processes} processes`);
              runs.push(
                await runHotKey(ctx, spec, c, s.processes, s.windowMs, model.name, (idealByC.get(c) ?? idealFor)(spec)),
              );
            }
          }
          if (s.fairness) {
            for (const spec of s.fairness.specs) {
              ctx.log(
                `  hot key ${model.name} C=${s.fairness.c} ${specLabel(spec)}, ${s.fairness.windowMs / 1000} s window`,
              );
              runs.push(
                await runHotKey(
                  ctx,
                  spec,
                  s.fairness.c,
                  1,
                  s.fairness.windowMs,
                  model.name,
                  (idealByC.get(s.fairness.c) ?? idealFor)(spec),
                ),
              );
            }
          }
        }
      }
  } finally {
    await dropSpare();
  }
  await ctx.host.setUniformDelay(0);
  const merged = mergeRounds(runs);
  report(part, merged, s.windowMs, s.fairness?.windowMs);
  part.charts.push(...charts(merged, s.models[0]!.name, s.windowMs, ctx.stamp));
  return part;
}

const isPeer = (run: HotRun) => run.spec.id !== "edge-redlock" && run.spec.id !== "no-lock";

function report(part: PartResult, runs: HotRun[], windowMs: number, fairnessMs: number | undefined): void {
  const main = runs.filter((r) => r.processes === 1 && r.windowS === windowMs / 1000);
  const groupKey = (r: HotRun) => `${r.delay}|${r.c}|${r.processes}|${r.windowS}`;
  const bestPeer = new Map<string, number>();
  const upstash = new Map<string, number>();
  for (const r of runs) {
    if (isPeer(r)) bestPeer.set(groupKey(r), Math.max(bestPeer.get(groupKey(r)) ?? 0, r.handoffsPerS));
    if (r.spec.id === "upstash-lock") upstash.set(`${groupKey(r)}|${r.spec.policy}`, r.requestsPerHandoff);
  }
  const row = (r: HotRun): string[] => {
    const best = bestPeer.get(groupKey(r));
    const up = upstash.get(`${groupKey(r)}|${r.spec.policy}`);
    const own = r.spec.id === "edge-redlock";
    return [
      r.delay,
      String(r.c),
      r.processes === 1 ? r.label : `${r.label}, ${r.processes} processes`,
      fmt(r.handoffsPerS, 1),
      own && best ? `${(r.handoffsPerS / best).toFixed(2)}×` : "",
      fmt(r.attemptsPerHandoff, 1),
      `${fmt(r.requestsPerHandoff, 1)} ${r.requestUnit}`,
      own && up ? ratio(r.requestsPerHandoff, up) : "",
      fmt(r.waitP50, 0),
      fmt(r.waitP99, 0),
      fmt(r.jain, 2),
      String(r.starved),
      String(r.gaveUp),
      String(r.lostUpdates),
      String(r.overlaps),
      `${Math.round(r.efficiency * 100)}%`,
    ];
  };
  const columns = [
    "delay",
    "C",
    "system",
    "handoffs/s",
    "÷ best peer",
    "attempts/handoff",
    "requests/handoff",
    "÷ @upstash/lock",
    "wait p50 ms",
    "wait p99 ms",
    "Jain",
    "starved",
    "gave up",
    "lost updates",
    "overlapping holds",
    "efficiency",
  ];
  const tables: Table[] = [];
  for (const delay of [...new Set(main.map((r) => r.delay))]) {
    const rows = main.filter((r) => r.delay === delay).sort((a, b) => a.c - b.c);
    tables.push({
      title: `Hot key, ${delay} per node, 1 client process, ${windowMs / 1000} s window`,
      columns,
      rows: rows.map(row),
    });
  }
  const multi = runs.filter((r) => r.processes > 1);
  if (multi.length > 0)
    tables.push({ title: "Hot key, clients spread over several processes", columns, rows: multi.map(row) });
  const long = runs.filter((r) => r.processes === 1 && r.windowS !== windowMs / 1000);
  if (long.length > 0)
    tables.push({
      title: `Hot key, fairness and steady state over a ${(fairnessMs ?? 0) / 1000} s window`,
      columns,
      rows: long.map(row),
    });
  part.tables.push(...tables);
  const named = ["set", "evalsha", "eval"];
  tables.length = 0;
  part.tables.push({
    title:
      "Commands the lock nodes received, per handoff (top-level: at the bridges or the TCP proxies; 1 client process)",
    columns: ["delay", "C", "system", ...named.map((n) => n.toUpperCase()), "other"],
    rows: main
      .filter((r) => r.spec.id !== "no-lock")
      .sort((a, b) => a.c - b.c)
      .map((r) => {
        const other = Object.entries(r.commandsPerHandoff)
          .filter(([name]) => !named.includes(name))
          .map(([name, v]) => `${name} ${fmt(v, 1)}`)
          .join(", ");
        return [r.delay, String(r.c), r.label, ...named.map((n) => fmt(r.commandsPerHandoff[n] ?? 0, 1)), other || "–"];
      }),
  });

  for (const r of runs) {
    part.violations.push({
      label: `${r.label} C=${r.c} ${r.delay}${r.processes > 1 ? ` ${r.processes} processes` : ""}`,
      lostUpdates: r.lostUpdates,
      overlaps: r.overlaps,
    });
    if (r.errors > 0) part.notes.push(`${r.label} C=${r.c} ${r.delay}: ${r.errors} errors, first: ${r.firstError}`);
  }
  explainGaps(part, main, bestPeer, upstash, groupKey);
  // The targets of the hot-key issue, one line each.
  for (const r of runs.filter((x) => x.spec.id === "edge-redlock")) {
    const where = `${r.label}, ${r.delay}, C = ${r.c}${r.processes > 1 ? `, ${r.processes} processes` : ""}${r.windowS !== windowMs / 1000 ? `, ${r.windowS} s` : ""}`;
    const best = bestPeer.get(groupKey(r));
    if (best !== undefined) {
      part.checks.push({
        target: `handoffs/s ≥ best peer (${where})`,
        measured: `${fmt(r.handoffsPerS)} vs ${fmt(best)} (${(r.handoffsPerS / best).toFixed(2)}×)`,
        pass: r.handoffsPerS >= best,
      });
    }
    const up = upstash.get(`${groupKey(r)}|${r.spec.policy}`);
    if (up !== undefined) {
      part.checks.push({
        target: `requests/handoff ≤ 2× @upstash/lock's (${where})`,
        measured: `${fmt(r.requestsPerHandoff)} vs ${fmt(up)} (${(r.requestsPerHandoff / up).toFixed(2)}×)`,
        pass: r.requestsPerHandoff <= 2 * up,
      });
    }
    if (r.c === 32 && r.windowS >= 30) {
      part.checks.push({
        target: `Jain fairness ≥ 0.8 at C = 32, 30 s window (${where})`,
        measured: fmt(r.jain, 2),
        pass: r.jain >= 0.8,
      });
    }
    part.checks.push({
      target: `0 lost updates, 0 overlapping holds (${where})`,
      measured: `${r.lostUpdates} / ${r.overlaps}`,
      pass: r.lostUpdates === 0 && r.overlaps === 0,
    });
  }
}

/** One figure per system and setting: medians over rounds for rates and waits, sums for the correctness counters. */
function mergeRounds(runs: HotRun[]): HotRun[] {
  const groups = new Map<string, HotRun[]>();
  for (const r of runs) {
    const key = `${r.delay}|${r.c}|${r.processes}|${r.windowS}|${r.label}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  return [...groups.values()].map((group) => {
    const first = group[0] as HotRun;
    if (group.length === 1) return first;
    const mid = (pick: (r: HotRun) => number) => median(group.map(pick).filter(Number.isFinite));
    const sum = (pick: (r: HotRun) => number) => group.reduce((a, r) => a + pick(r), 0);
    const names = new Set(group.flatMap((r) => Object.keys(r.commandsPerHandoff)));
    return {
      ...first,
      handoffsPerS: mid((r) => r.handoffsPerS),
      attemptsPerHandoff: mid((r) => r.attemptsPerHandoff),
      requestsPerHandoff: mid((r) => r.requestsPerHandoff),
      waitP50: mid((r) => r.waitP50),
      waitP99: mid((r) => r.waitP99),
      jain: mid((r) => r.jain),
      starved: mid((r) => r.starved),
      gaveUp: mid((r) => r.gaveUp),
      efficiency: mid((r) => r.efficiency),
      errors: sum((r) => r.errors),
      lostUpdates: sum((r) => r.lostUpdates),
      overlaps: sum((r) => r.overlaps),
      commandsPerHandoff: Object.fromEntries([...names].map((n) => [n, mid((r) => r.commandsPerHandoff[n] ?? 0)])),
    };
  });
}

/** Where edge-redlock is behind the best peer, say so and point at the measured cause. */
function explainGaps(
  part: PartResult,
  main: HotRun[],
  bestPeer: Map<string, number>,
  upstash: Map<string, number>,
  groupKey: (r: HotRun) => string,
): void {
  for (const r of main.filter((x) => x.spec.id === "edge-redlock")) {
    const best = bestPeer.get(groupKey(r));
    if (best === undefined || r.handoffsPerS >= best) continue;
    const sets = r.commandsPerHandoff.set ?? 0;
    const scripts = (r.commandsPerHandoff.evalsha ?? 0) + (r.commandsPerHandoff.eval ?? 0);
    const up = upstash.get(`${groupKey(r)}|${r.spec.policy}`);
    const tcp = main.find((x) => groupKey(x) === groupKey(r) && x.spec.id === "sesame-redlock")?.idealCycleMs;
    part.notes.push(
      `edge-redlock is behind at C = ${r.c} (${r.delay}, ${r.spec.policy}): ${fmt(r.handoffsPerS)} handoffs/s against ${fmt(best)} for the best peer. ` +
        `Its waiters stand in line at the gate, and the first in line aims one fan-out at the predicted release: ${fmt(r.attemptsPerHandoff)} fan-outs (each client's first attempt included), ${fmt(sets)} SETs and ${fmt(scripts)} script calls (gate polls, releases) per handoff` +
        `${up === undefined ? "" : `, where @upstash/lock polls one node (${fmt(up)} requests per handoff)`}. ` +
        `Each handoff still waits for the quorum-th answer of a REST fan-out sent after the release: the ideal cycle (acquire + release + critical section) is ${fmt(r.idealCycleMs)} ms over REST` +
        `${tcp === undefined ? "" : ` against ${fmt(tcp)} ms over TCP`}, and edge-redlock ran at ${Math.round(r.efficiency * 100)}% of its ideal rate (wait p50 ${fmt(r.waitP50, 0)} ms, ${r.starved} of ${r.c} clients starved).`,
    );
  }
}

function charts(runs: HotRun[], delay: string, windowMs: number, stamp: string): Chart[] {
  const main = runs.filter(
    (r) => r.processes === 1 && r.delay === delay && r.windowS === windowMs / 1000 && r.spec.id !== "no-lock",
  );
  const labels = [...new Set(main.map((r) => r.label))];
  const cs = [...new Set(main.map((r) => r.c))].sort((a, b) => a - b);
  const series = (value: (r: HotRun) => number) =>
    labels.map((name) => ({
      name,
      points: main
        .filter((r) => r.label === name)
        .sort((a, b) => a.c - b.c)
        .map((r) => [r.c, value(r)] as [number, number]),
    }));
  return [
    {
      file: "hotkey-handoffs.svg",
      title: `Hot key: handoffs/s against C (${delay} per node)`,
      svg: lineChart({
        title: `Hot key: handoffs per second (${delay} per node)`,
        xLabel: "C (clients)",
        yLabel: "handoffs / s",
        series: series((r) => r.handoffsPerS),
        xTicks: cs,
        subtitle: stamp,
      }),
    },
    {
      file: "hotkey-requests.svg",
      title: `Hot key: requests per handoff against C (${delay} per node)`,
      svg: lineChart({
        title: `Hot key: requests per handoff (${delay} per node, log scale)`,
        xLabel: "C (clients)",
        yLabel: "requests / handoff (HTTP or TCP commands)",
        series: series((r) => r.requestsPerHandoff),
        xTicks: cs,
        logY: true,
        subtitle: stamp,
      }),
    },
  ];
}
