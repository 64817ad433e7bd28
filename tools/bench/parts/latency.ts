/** Parts 2, 3 and 5: the floor, uncontended acquire + release, and one slow node. */
import { type BenchContext, type Chart, emptyPart, type PartResult } from "../context.js";
import { fmt, median, quantile, ratio } from "../stats.js";
import { floorRest, floorTcp, lockSubject, measureInterleaved, type Subject } from "../subjects.js";
import { lineChart } from "../svg.js";
import type { SystemSpec } from "../systems.js";

const PEERS_TCP: SystemSpec["id"][] = ["sesame-redlock", "redlock-universal"];

function sizes(ctx: BenchContext) {
  const { quick, smoke, rounds } = ctx.options;
  if (smoke) return { ns: [3], delays: [0], rounds: 1, perRound: 2 };
  if (quick) return { ns: [1, 5], delays: [0, 20], rounds: Math.min(rounds, 3), perRound: 6 };
  return { ns: [1, 3, 5, 7], delays: [0, 20], rounds, perRound: 10 };
}

/** Part 2: the floor of each transport, acquire + release, N = 1…7. */
export async function floorPart(ctx: BenchContext): Promise<PartResult> {
  const part = emptyPart("floor", "Floor: bare transports, acquire + release");
  // Quick mode: N = 5 only (the uncontended part times the floors again beside every system).
  const s = { ...sizes(ctx), ...(ctx.options.quick && !ctx.options.smoke ? { ns: [5] } : {}) };
  part.method.push(
    "REST: `SET key token NX PX 10000` by fetch to all N nodes, done at the quorum-th answer; then a compare-and-delete `EVAL` to all N, done at the quorum-th answer.",
    "TCP: the same two fan-outs over one kept-open RESP connection per node, through the delaying TCP proxies.",
    `${s.rounds} interleaved rounds × ${s.perRound} runs per subject; p50/p99 over all runs.`,
  );
  const table = {
    title: "Floor (ms per acquire + release)",
    columns: ["delay", "N", "REST p50", "REST p99", "TCP p50", "TCP p99"],
    rows: [] as string[][],
  };
  for (const delay of s.delays) {
    await ctx.host.setUniformDelay(delay);
    for (const n of s.ns) {
      const subjects = [floorRest(ctx.host.nodes, n), await floorTcp(ctx.host.nodes, n)];
      const samples = await measureInterleaved(subjects, s.rounds, s.perRound, `floor:${delay}:${n}`);
      const [rest, tcp] = samples.map((perRound) => perRound.flat());
      table.rows.push([
        `+${delay} ms`,
        String(n),
        fmt(median(rest!)),
        fmt(quantile(rest!, 0.99)),
        fmt(median(tcp!)),
        fmt(quantile(tcp!, 0.99)),
      ]);
      for (const subject of subjects) await subject.close();
    }
  }
  part.tables.push(table);
  return part;
}

/** Part 3: uncontended acquire + release, N = 1, 3, 5, 7, against the floor of the same transport. */
export async function uncontendedPart(ctx: BenchContext): Promise<PartResult> {
  const part = emptyPart("uncontended", "Uncontended acquire + release");
  const s = sizes(ctx);
  part.method.push(
    "One client per system, sequential acquire + release of a fresh key (TTL 10 s); the floors run in the same rounds.",
    `${s.rounds} interleaved rounds × ${s.perRound} runs per subject (order rotates each round). Ratio: p50 / p50 of the floor of the same transport, per round (median shown) and overall.`,
    "@upstash/lock locks one node whatever N is; it is timed at N = 1 only.",
  );
  const table = {
    title: "Uncontended acquire + release (ms)",
    columns: ["delay", "N", "system", "p50", "p99", "÷ floor (median of rounds)", "÷ floor (overall p50)"],
    rows: [] as string[][],
  };
  let cdf: Chart | undefined;
  for (const delay of s.delays) {
    await ctx.host.setUniformDelay(delay);
    for (const n of s.ns) {
      const specs: SystemSpec[] = [
        { id: "edge-redlock", policy: "defaults", n },
        ...(n === 1 ? [{ id: "upstash-lock", policy: "defaults", n } as SystemSpec] : []),
        ...PEERS_TCP.map((id) => ({ id, policy: "defaults", n }) as SystemSpec),
      ];
      const subjects: Subject[] = [floorRest(ctx.host.nodes, n), await floorTcp(ctx.host.nodes, n)];
      for (const spec of specs) subjects.push(await lockSubject(spec, ctx.host.nodes));
      const samples = await measureInterleaved(subjects, s.rounds, s.perRound, `unc:${delay}:${n}`);
      const floorOf = (transport: string) => (transport === "REST" ? 0 : 1);
      subjects.forEach((subject, i) => {
        const perRound = samples[i]!;
        const all = perRound.flat();
        const floorRounds = samples[floorOf(subject.transport)]!;
        const roundRatios = perRound.map((r, k) => median(r) / median(floorRounds[k]!));
        const overall = median(all) / median(floorRounds.flat());
        table.rows.push([
          `+${delay} ms`,
          String(n),
          i < 2 ? subject.label : `${subject.label.replace(" (defaults)", "")} [${subject.transport}]`,
          fmt(median(all)),
          fmt(quantile(all, 0.99)),
          i < 2 ? "1" : `${median(roundRatios).toFixed(2)}×`,
          i < 2 ? "1" : `${overall.toFixed(2)}×`,
        ]);
        if (subject.label.startsWith("edge-redlock") && delay === 20) {
          const target = median(roundRatios);
          part.checks.push({
            target: `uncontended p50 ≤ 1.10× the raw fetch floor at +20 ms per node (N = ${n})`,
            measured: `${target.toFixed(2)}× (median of per-round ratios), ${overall.toFixed(2)}× overall`,
            pass: target <= 1.1,
          });
        }
      });
      if (n === (s.ns.includes(5) ? 5 : s.ns.at(-1)) && delay === s.delays.at(-1)) {
        cdf = latencyCdf(subjects, samples, n, delay, ctx.stamp);
      }
      for (const subject of subjects) await subject.close();
    }
  }
  part.tables.push(table);
  if (cdf) part.charts.push(cdf);
  return part;
}

function latencyCdf(subjects: Subject[], samples: number[][][], n: number, delay: number, stamp: string): Chart {
  const series = subjects.map((subject, i) => {
    const sorted = samples[i]!.flat().sort((a, b) => a - b);
    return {
      name: subject.label.replace(" (defaults)", ""),
      points: sorted.map((v, k) => [v, (k + 1) / sorted.length] as [number, number]),
    };
  });
  // Cut the long tail (shown in the table's p99) so the bulk of each distribution stays readable.
  const xMax = Math.max(...samples.map((perRound) => quantile(perRound.flat(), 0.95))) * 1.3;
  return {
    file: "uncontended-latency.svg",
    title: `Uncontended acquire + release latency, N = ${n}, +${delay} ms per node`,
    svg: lineChart({
      title: `Uncontended acquire + release, N = ${n}, +${delay} ms per node (cumulative distribution)`,
      xLabel: "milliseconds",
      yLabel: "fraction of runs ≤ x",
      series,
      step: true,
      xMax,
      subtitle: stamp,
    }),
  };
}

/** Rounds go uniform, slow, slow, uniform, …: the ABBA order cancels a steady drift of the machine's load. */
function isSlowRound(round: number): boolean {
  return round % 4 === 1 || round % 4 === 2;
}

/** Part 5: one of 5 nodes at +300 ms, alternated round by round with all at +20 ms. */
export async function slowNodePart(ctx: BenchContext): Promise<PartResult> {
  const part = emptyPart("slow-node", "One slow node");
  const { smoke, quick } = ctx.options;
  const n = smoke ? 3 : 5;
  const pairs = smoke ? 1 : quick ? 2 : Math.max(2, Math.ceil(ctx.options.rounds / 2) + 1);
  const perRound = smoke ? 2 : quick ? 5 : 8;
  const base = smoke ? 0 : 20;
  const slow = smoke ? 50 : 300;
  part.method.push(
    `N = ${n}. Rounds alternate between all nodes at +${base} ms and node 0 at +${slow} ms with the rest at +${base} ms, in ABBA order (a steady drift of the machine's load cancels out); ${pairs} pairs of rounds × ${perRound} runs per subject. @upstash/lock (one node) is left out.`,
  );
  const specs: SystemSpec[] = [
    { id: "edge-redlock", policy: "defaults", n },
    ...PEERS_TCP.map((id) => ({ id, policy: "defaults", n }) as SystemSpec),
  ];
  await ctx.host.setUniformDelay(base);
  const subjects: Subject[] = [floorRest(ctx.host.nodes, n), await floorTcp(ctx.host.nodes, n)];
  for (const spec of specs) subjects.push(await lockSubject(spec, ctx.host.nodes));
  const samples = await measureInterleaved(subjects, pairs * 2, perRound, "slow", async (round) => {
    const isSlow = isSlowRound(round);
    await ctx.host.setDelays(
      ctx.host.nodes.map((_, i) => ({ fixedMs: i === 0 && isSlow ? slow : base, jitterMs: 0 })),
      { fixedMs: base, jitterMs: 0 },
    );
  });
  const table = {
    title: `One slow node (ms, N = ${n})`,
    columns: ["system", `p50 all +${base}`, `p50 one at +${slow}`, "change in p50", "ratio"],
    rows: [] as string[][],
  };
  subjects.forEach((subject, i) => {
    const rounds = samples[i]!;
    const even = rounds.filter((_, k) => !isSlowRound(k)).flat();
    const odd = rounds.filter((_, k) => isSlowRound(k)).flat();
    table.rows.push([
      subject.label.replace(" (defaults)", ""),
      fmt(median(even)),
      fmt(median(odd)),
      `${median(odd) - median(even) >= 0 ? "+" : ""}${fmt(median(odd) - median(even))}`,
      ratio(median(odd), median(even)),
    ]);
  });
  for (const subject of subjects) await subject.close();
  await ctx.host.setUniformDelay(0);
  part.tables.push(table);
  return part;
}
