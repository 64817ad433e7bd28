/**
 * Parts "isolates" and "geo": the hot key as edge platforms see it. P client processes stand in
 * for P isolates, each with its own client of the system under test, its own `fetch` and its own
 * latency to every node (./isolate-clients.ts); 1 or 4 callers per process share its client and
 * loop acquire → critical section → release on one key. Every system runs on the same nodes in
 * the same run, interleaved round by round; figures are medians over the rounds.
 */
import type { ChildProcess } from "node:child_process";
import { loadavg } from "node:os";
import { type BenchContext, emptyPart, type PartResult } from "../context.js";
import { exited, forkJs } from "../fork.js";
import { bundleIsolateWorker, type WorkerBundle } from "../isolate-bundle.js";
import { floorCycleMs, GEO, type LatencyProfile, type Placement, UNIFORM } from "../isolate-latency.js";
import type { IsolateFigures, IsolateReply, IsolateRequest } from "../isolate-protocol.js";
import { restCommand } from "../raw.js";
import { jainIndex, median, quantile, rotate } from "../stats.js";
import { SYSTEMS, type SystemSpec, specLabel } from "../systems.js";
import { reportIsolates } from "./isolates-report.js";

const TTL_MS = 10_000;

/** One isolate's figures in one run (or the median over rounds). */
export interface IsolateRow {
  region: string;
  floorMs: number;
  handoffsPerS: number;
  waitP50: number;
  waitP99: number;
  /** Requests per acquire() call (release included), every call of the run(s). */
  calls: number[];
}

/** One run of one system in one layout (or the merge of its rounds). */
export interface IsolateRun {
  spec: SystemSpec;
  label: string;
  p: number;
  callers: number;
  windowS: number;
  /** Handoffs per second in each round (one entry per round merged). */
  rounds: number[];
  handoffsPerS: number;
  isolates: IsolateRow[];
  /** Share of critical sections followed by one in the same isolate (the key's history), 0..1. */
  sameIsolateNext: number;
  jainCallers: number;
  jainIsolates: number;
  starved: number;
  waitP50: number;
  waitP99: number;
  requestsPerHandoff: number;
  outsidePerHandoff: number;
  /** Requests per acquire() call, release included, pooled over isolates (and rounds). */
  calls: number[];
  cut: number;
  gaveUp: number;
  /** Give-ups by the reason the system named, summed over isolates (and rounds). */
  gaveUpFor: Record<string, number>;
  errors: number;
  lostUpdates: number;
  overlaps: number;
  /** Mean physical floor of a fair handoff over the isolates, ms. */
  floorMs: number;
  firstError?: string;
}

/** What a part runs. */
export interface IsolatePlan {
  ps: number[];
  callers: number[];
  specs: SystemSpec[];
  rounds: number;
  windowMs: number;
  drainMs: number;
  n: number;
  control: boolean;
}

const NEGATIVE: SystemSpec = { id: "no-lock", policy: "defaults", n: 0 };

/**
 * Every system with its defaults first, then the variants: --quick runs the first 4, a full run
 * the first 5, --final all of them (the best peer is the best of either policy); the smoke run
 * all of them in the uniform profile and the first 3 in the geo profile.
 */
function allSpecs(n: number): SystemSpec[] {
  return [
    { id: "edge-redlock", policy: "defaults", n },
    { id: "upstash-lock", policy: "defaults", n },
    { id: "sesame-redlock", policy: "defaults", n },
    { id: "redlock-universal", policy: "defaults", n },
    { id: "edge-redlock", policy: "retryDelay", n },
    { id: "upstash-lock", policy: "equal", n },
    { id: "sesame-redlock", policy: "equal", n },
    { id: "redlock-universal", policy: "equal", n },
  ];
}

function plan(ctx: BenchContext, profile: LatencyProfile): IsolatePlan {
  const o = ctx.options;
  const n = o.smoke ? 3 : 5;
  let specs = allSpecs(n);
  if (o.systems && o.systems.length > 0) {
    const wanted = o.systems;
    specs = specs.filter((s) => wanted.includes(s.id) || wanted.includes(`${s.id}:${s.policy}`));
    if (specs.length === 0) throw new Error(`--systems ${wanted.join(",")} names no system of the isolates parts`);
  } else if (o.smoke) specs = profile.id === "geo" ? specs.slice(0, 3) : specs;
  else if (o.quick) specs = specs.slice(0, 4);
  else if (!o.final) specs = specs.slice(0, 5);
  if (o.smoke) {
    return {
      ps: o.isolates ?? [2],
      callers: o.callers ?? (profile.id === "geo" ? [1] : [2]),
      specs,
      rounds: 1,
      windowMs: o.durationS * 1000,
      drainMs: 500,
      n,
      control: profile.id === "uniform",
    };
  }
  const rounds = o.isolateRounds ?? 3;
  if (!Number.isInteger(rounds) || rounds < 3) throw new Error("the isolates parts need at least 3 rounds");
  return {
    ps: o.isolates ?? [8, 16],
    callers: o.callers ?? [1, 4],
    specs,
    rounds,
    windowMs: o.final ? 30_000 : o.durationS * 1000,
    // The final run lets the calls of the window finish (up to 15 s: edge-redlock's default
    // patience is about 11 s), so that the most requests one call sent is whole, not cut short.
    drainMs: o.final ? 15_000 : o.quick ? 2000 : 3000,
    n,
    control: profile.id === "uniform",
  };
}

export function isolatesPart(ctx: BenchContext): Promise<PartResult> {
  return isolatePart(ctx, UNIFORM);
}

export function geoPart(ctx: BenchContext): Promise<PartResult> {
  return isolatePart(ctx, GEO);
}

async function isolatePart(ctx: BenchContext, profile: LatencyProfile): Promise<PartResult> {
  const s = plan(ctx, profile);
  const part = emptyPart(
    profile.id === "uniform" ? "isolates" : "geo",
    profile.id === "uniform" ? "Hot key across isolates, +20 ms" : "Hot key across isolates, geo latency",
  );
  const runsPerRound = s.ps.length * s.callers.length * s.specs.length;
  const estimateS = (s.rounds * runsPerRound * (s.windowMs + Math.min(s.drainMs, 5000) + 3000)) / 1000;
  ctx.log(
    `  ${s.rounds} rounds × ${runsPerRound} runs of ${s.windowMs / 1000} s: about ${Math.round(estimateS / 60)} min`,
  );
  await ctx.host.setUniformDelay(0);
  const base = await baseRttMs(ctx);
  const bundle = await bundleIsolateWorker();
  const runs: IsolateRun[] = [];
  const loads: string[] = [];
  try {
    for (let round = 0; round < s.rounds; round++) {
      loads.push(
        `round ${round + 1}: ${loadavg()
          .map((l) => l.toFixed(1))
          .join(", ")}`,
      );
      let layout = 0;
      for (const p of s.ps)
        for (const callers of s.callers) {
          // Systems interleaved: each round and layout starts at another system.
          for (const spec of rotate(s.specs, round + layout)) {
            ctx.log(`  ${profile.name} round ${round + 1}: ${p} × ${callers} ${specLabel(spec)}`);
            runs.push(await runIsolates(ctx, bundle, profile, spec, p, callers, s, base));
          }
          if (s.control && round === 0 && layout === 0) {
            ctx.log(`  ${profile.name}: ${p} × ${callers} negative control`);
            runs.push(await runIsolates(ctx, bundle, profile, NEGATIVE, p, callers, s, base));
          }
          layout++;
        }
    }
  } finally {
    bundle.dispose();
  }
  // Rows in the plan's order of systems (the negative control last), whatever order round 1 ran them in.
  const rank = (r: IsolateRun) => {
    const i = s.specs.findIndex((spec) => specLabel(spec) === r.label);
    return i < 0 ? s.specs.length : i;
  };
  const merged = mergeRounds(runs).sort((a, b) => a.p - b.p || a.callers - b.callers || rank(a) - rank(b));
  reportIsolates(part, profile, s, merged, { baseMs: base, loads });
  return part;
}

/**
 * The loopback cost of one REST request to a lock node, no delay added: the fastest of 20 (the
 * floor is physical: what a loaded machine adds on top belongs to the distance from it).
 */
async function baseRttMs(ctx: BenchContext): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 21; i++) {
    const t = performance.now();
    await restCommand(ctx.host.nodes[0]!, ["PING"]);
    times.push(performance.now() - t);
  }
  return Math.min(...times.slice(1));
}

let serial = 0;

function nextReply(worker: ChildProcess): Promise<IsolateReply> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`client process exited early (code ${code})`));
    worker.once("exit", onExit);
    worker.once("message", (message: IsolateReply) => {
      worker.off("exit", onExit);
      resolve(message);
    });
  });
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** One run: P fresh client processes of `spec`, `callers` each, for one window and its drain. */
async function runIsolates(
  ctx: BenchContext,
  bundle: WorkerBundle,
  profile: LatencyProfile,
  spec: SystemSpec,
  p: number,
  callers: number,
  s: IsolatePlan,
  baseMs: number,
): Promise<IsolateRun> {
  const id = `iso:${process.pid}:${Date.now().toString(36)}:${serial++}`;
  const counterKey = `${id}:counter`;
  const placements = Array.from({ length: p }, (_, k) => profile.placement(k, ctx.host.nodes.length));
  const workers = placements.map(() => forkJs(bundle.path));
  try {
    const ready = workers.map(nextReply);
    workers.forEach((worker, k) => {
      worker.send({
        type: "prepare",
        config: {
          spec,
          nodes: [...ctx.host.nodes],
          data: ctx.host.data,
          placement: placements[k]!,
          callers,
          key: id,
          counterKey,
          holdersKey: `${id}:holders`,
          ttlMs: TTL_MS,
        },
      } satisfies IsolateRequest);
    });
    for (const reply of await within(Promise.all(ready), 60_000, "prepare"))
      if (reply.type !== "ready") throw new Error(describe(reply));
    const startAt = Date.now() + 200;
    const results = workers.map(nextReply);
    for (const worker of workers)
      worker.send({ type: "go", startAt, windowMs: s.windowMs, drainMs: s.drainMs } satisfies IsolateRequest);
    const figures: IsolateFigures[] = [];
    for (const reply of await within(Promise.all(results), s.windowMs + s.drainMs + 30_000, "results")) {
      if (reply.type !== "results") throw new Error(describe(reply));
      figures.push(reply.figures);
    }
    await Promise.all(workers.map(exited));
    const counter = Number((await restCommand(ctx.host.data, ["GET", counterKey])) ?? 0);
    return summarise(spec, p, callers, s, placements, figures, counter, baseMs);
  } finally {
    for (const worker of workers) if (worker.exitCode === null) worker.kill("SIGKILL");
    await Promise.all(workers.map(exited));
  }
}

function describe(reply: IsolateReply): string {
  return reply.type === "failed" ? `client process failed: ${reply.error}` : `unexpected reply ${reply.type}`;
}

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

function summarise(
  spec: SystemSpec,
  p: number,
  callers: number,
  s: IsolatePlan,
  placements: Placement[],
  figures: IsolateFigures[],
  counter: number,
  baseMs: number,
): IsolateRun {
  const windowS = s.windowMs / 1000;
  const nodesUsed = SYSTEMS[spec.id].nodesUsed(spec.n);
  const allCallers = figures.flatMap((f) => f.callers);
  const handoffs = sum(allCallers.map((c) => c.handoffs));
  const withOpen = (c: IsolateFigures["callers"][number]) =>
    c.openWait === undefined ? c.waits : [...c.waits, c.openWait];
  const waits = allCallers.flatMap(withOpen);
  const isolates: IsolateRow[] = figures.map((f, k) => {
    const own = f.callers.flatMap(withOpen);
    return {
      region: placements[k]!.region,
      floorMs: nodesUsed > 0 ? floorCycleMs(placements[k]!, nodesUsed, baseMs) : Number.NaN,
      handoffsPerS: sum(f.callers.map((c) => c.handoffs)) / windowS,
      waitP50: median(own),
      waitP99: quantile(own, 0.99),
      calls: f.calls,
    };
  });
  const sections = sum(figures.map((f) => f.sections));
  const firstError = figures.find((f) => f.firstError)?.firstError;
  return {
    spec,
    label: specLabel(spec),
    p,
    callers,
    windowS,
    rounds: [handoffs / windowS],
    handoffsPerS: handoffs / windowS,
    isolates,
    sameIsolateNext: sameIsolateNext(figures),
    jainCallers: jainIndex(allCallers.map((c) => c.handoffs)),
    jainIsolates: jainIndex(isolates.map((i) => i.handoffsPerS)),
    starved: allCallers.filter((c) => c.handoffs === 0).length,
    waitP50: median(waits),
    waitP99: quantile(waits, 0.99),
    requestsPerHandoff: nodesUsed > 0 ? sum(figures.map((f) => f.windowRequests)) / handoffs : Number.NaN,
    outsidePerHandoff: nodesUsed > 0 ? sum(figures.map((f) => f.outsideRequests)) / handoffs : Number.NaN,
    calls: figures.flatMap((f) => f.calls),
    cut: sum(figures.map((f) => f.cut)),
    gaveUp: sum(figures.map((f) => f.gaveUp)),
    gaveUpFor: sumCounts(figures.map((f) => f.gaveUpFor)),
    errors: sum(figures.map((f) => f.errors)),
    // A section counts once its SET was acknowledged, so the counter can only fall short by lost updates.
    lostUpdates: Math.max(0, sections - counter),
    overlaps: sum(figures.map((f) => f.overlaps)),
    floorMs: nodesUsed > 0 ? sum(isolates.map((i) => i.floorMs)) / isolates.length : Number.NaN,
    ...(firstError ? { firstError } : {}),
  };
}

/**
 * Of the critical sections whose successor in the key's history ran too (counter value v and v+1
 * both read by a section), the share whose successor ran in the same process: the lock went on
 * inside the isolate (a pass-on, or the same caller or a neighbour taking it again).
 */
function sameIsolateNext(figures: IsolateFigures[]): number {
  const owner = new Map<number, number>();
  figures.forEach((f, k) => {
    for (const c of f.callers) for (const v of c.sequence) owner.set(v, k);
  });
  let pairs = 0;
  let same = 0;
  for (const [v, k] of owner) {
    const next = owner.get(v + 1);
    if (next === undefined) continue;
    pairs++;
    if (next === k) same++;
  }
  return pairs > 0 ? same / pairs : Number.NaN;
}

/** Counts by name, added up. */
function sumCounts(counts: readonly Record<string, number>[]): Record<string, number> {
  const total: Record<string, number> = {};
  for (const count of counts) for (const [name, n] of Object.entries(count)) total[name] = (total[name] ?? 0) + n;
  return total;
}

/**
 * One row per system and layout: medians over the rounds for rates, fairness, waits and
 * requests per handoff; the calls of every round pooled (their p50, p99 and max); sums for the
 * correctness counters, errors, cut calls and the give-ups' reasons.
 */
export function mergeRounds(runs: IsolateRun[]): IsolateRun[] {
  const groups = new Map<string, IsolateRun[]>();
  for (const r of runs) {
    const key = `${r.p}|${r.callers}|${r.label}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  return [...groups.values()].map((group) => {
    const first = group[0] as IsolateRun;
    if (group.length === 1) return first;
    const mid = (pick: (r: IsolateRun) => number) => median(group.map(pick).filter(Number.isFinite));
    const total = (pick: (r: IsolateRun) => number) => sum(group.map(pick));
    return {
      ...first,
      rounds: group.map((r) => r.handoffsPerS),
      handoffsPerS: mid((r) => r.handoffsPerS),
      isolates: first.isolates.map((row, k) => {
        const rows = group.map((r) => r.isolates[k] as IsolateRow);
        return {
          ...row,
          handoffsPerS: median(rows.map((x) => x.handoffsPerS)),
          waitP50: median(rows.map((x) => x.waitP50).filter(Number.isFinite)),
          waitP99: median(rows.map((x) => x.waitP99).filter(Number.isFinite)),
          calls: rows.flatMap((x) => x.calls),
        };
      }),
      sameIsolateNext: mid((r) => r.sameIsolateNext),
      jainCallers: mid((r) => r.jainCallers),
      jainIsolates: mid((r) => r.jainIsolates),
      starved: mid((r) => r.starved),
      waitP50: mid((r) => r.waitP50),
      waitP99: mid((r) => r.waitP99),
      requestsPerHandoff: mid((r) => r.requestsPerHandoff),
      outsidePerHandoff: mid((r) => r.outsidePerHandoff),
      calls: group.flatMap((r) => r.calls),
      cut: total((r) => r.cut),
      gaveUp: mid((r) => r.gaveUp),
      gaveUpFor: sumCounts(group.map((r) => r.gaveUpFor)),
      errors: total((r) => r.errors),
      lostUpdates: total((r) => r.lostUpdates),
      overlaps: total((r) => r.overlaps),
      floorMs: mid((r) => r.floorMs),
    };
  });
}
