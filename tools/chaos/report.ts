/**
 * The figures of a run: a summary table per scenario (operations, faults, anomalies per checker,
 * acquire p50/p99, success rate) and the JSON report.
 * @module
 */
import type { ScenarioResult } from "./harness.js";

/** The report of a whole run, as written to report.json. */
export interface RunReport {
  readonly command: string;
  readonly seed: number;
  readonly durationMs: number;
  readonly machine: { readonly cpus: number; readonly cpuModel: string; readonly node: string; readonly redis: string };
  readonly startedAt: string;
  readonly scenarios: readonly ScenarioSummary[];
  readonly pass: boolean;
}

/** One scenario in the report. */
export interface ScenarioSummary {
  readonly name: string;
  readonly kind: "safe" | "control" | "finding";
  readonly description: string;
  readonly config: { nodes: number; quorum: number; ttlMs: number; build: string; brokenClock: boolean };
  readonly durationMs: number;
  readonly operations: number;
  readonly faults: Readonly<Record<string, number>>;
  readonly anomalies: ScenarioResult["anomalies"];
  readonly pass: boolean;
  readonly reasons: readonly string[];
  readonly grants: number;
  /** Grants of semaphores and read-write locks (checkers 6 and 7). */
  readonly primitiveGrants: number;
  /** The most permits of one semaphore claimed at once (0 without a semaphore). */
  readonly mostPermitsAtOnce: number;
  readonly audits: number;
  /** Claimed window ends checked against the nodes' log (checker 2, second source). */
  readonly logChecks: number;
  /** Smallest distance from a claim to the quorum's earliest possible expiry (negative within the audit's round trip). */
  readonly minClaimMarginMs: number | null;
  /** Smallest distance from a claim to the quorum's latest possible expiry (an anomaly below 0). */
  readonly minClaimUpperMarginMs: number | null;
  readonly maxOverlapMs: number;
  readonly foreignTouchChecks: number;
  readonly counterWrites: number;
  readonly fencing: string;
  readonly liveness: {
    acquires: number;
    acquired: number;
    successRate: number | null;
    healthySuccessRate: number | null;
    p50Ms: number | null;
    p99Ms: number | null;
    reacquireAfterDeathMs: readonly number[];
    leftoverKeys: number;
    leftoverMaxPttlMs: number;
  };
  /** First anomaly of each checker, as evidence. */
  readonly examples: Readonly<Record<string, unknown>>;
  /** Per checker: the kinds of fault active when its anomalies happened (empty: none was). */
  readonly anomalyFaults: Readonly<Record<string, readonly string[]>>;
}

const finiteOrNull = (n: number) => (Number.isFinite(n) ? Math.round(n * 100) / 100 : null);

/** Summarises one scenario. */
export function summarize(result: ScenarioResult): ScenarioSummary {
  const { checks, scenario } = result;
  const l = checks.liveness;
  const examples: Record<string, unknown> = {};
  if (checks.overlap.anomalies[0]) examples.overlap = checks.overlap.anomalies[0];
  if (checks.claims.anomalies[0]) examples.overClaim = checks.claims.anomalies[0];
  if (checks.backing.anomalies[0]) examples.overClaimLog = checks.backing.anomalies[0];
  if (checks.foreignTouch.anomalies[0]) examples.foreignTouch = checks.foreignTouch.anomalies[0];
  if (checks.counter.unfenced.anomalies[0]) examples.lostUnfenced = checks.counter.unfenced.anomalies[0];
  if (checks.counter.fenced?.anomalies[0]) examples.lostFenced = checks.counter.fenced.anomalies[0];
  const overPermits = checks.primitives.permits.filter((p) => p.anomaly !== undefined);
  if (overPermits[0]) examples.overPermits = overPermits[0];
  if (checks.primitives.readWrite[0]) examples.readWrite = checks.primitives.readWrite[0];
  const anomalyTimes: Record<string, number[]> = {
    overlap: checks.overlap.anomalies.map((a) => a.start),
    overClaim: [...checks.claims.anomalies.map((a) => a.t), ...checks.backing.anomalies.map((a) => a.t)],
    foreignTouch: checks.foreignTouch.anomalies.map((a) => a.t),
    lostUnfenced: checks.counter.unfenced.anomalies.map((a) => a.t),
    lostFenced: checks.counter.fenced?.anomalies.map((a) => a.t) ?? [],
    overPermits: overPermits.map((p) => p.anomaly?.at as number),
    readWrite: checks.primitives.readWrite.map((a) => a.start),
  };
  const windows = faultWindows(result.history);
  const anomalyFaults: Record<string, string[]> = {};
  for (const [checker, times] of Object.entries(anomalyTimes)) {
    if (times.length === 0) continue;
    // A fault that ended shortly before can still be the cause (a forgotten key, a paused holder).
    const kinds = windows.filter((w) => times.some((t) => t >= w.start && t <= w.end + 2 * scenario.ttlMs));
    anomalyFaults[checker] = [...new Set(kinds.map((w) => w.kind))].sort();
  }
  return {
    name: scenario.name,
    kind: scenario.kind,
    description: scenario.description,
    config: {
      nodes: scenario.nodes,
      quorum: scenario.quorum,
      ttlMs: scenario.ttlMs,
      build: scenario.build,
      brokenClock: scenario.brokenClock === true,
    },
    durationMs: Math.round(result.durationMs),
    operations: result.operations,
    faults: result.faults,
    anomalies: result.anomalies,
    pass: result.verdict.pass,
    reasons: result.verdict.reasons,
    grants: checks.overlap.grants,
    primitiveGrants: checks.primitives.grants,
    mostPermitsAtOnce: Math.max(0, ...checks.primitives.permits.map((p) => p.mostAtOnce)),
    audits: checks.claims.audits,
    logChecks: checks.backing.checked,
    ...(checks.backing.clockSkewed ? { logChecksClockSkewed: checks.backing.clockSkewed } : {}),
    ...(checks.backing.clockUncertain ? { logChecksClockUncertain: checks.backing.clockUncertain } : {}),
    minClaimMarginMs: finiteOrNull(checks.claims.minMarginMs),
    minClaimUpperMarginMs: finiteOrNull(checks.claims.minUpperMarginMs),
    maxOverlapMs: Math.round(checks.overlap.maxOverlapMs),
    foreignTouchChecks: checks.foreignTouch.touches,
    counterWrites: checks.counter.unfenced.writes,
    fencing: checks.counter.fencingAvailable ? "available" : "unavailable",
    liveness: {
      acquires: l.acquires,
      acquired: l.acquired,
      successRate: finiteOrNull(l.successRate),
      healthySuccessRate: finiteOrNull(l.healthySuccessRate),
      p50Ms: finiteOrNull(l.p50Ms),
      p99Ms: finiteOrNull(l.p99Ms),
      reacquireAfterDeathMs: l.reacquireAfterDeathMs.map((x) => Math.round(x)),
      leftoverKeys: l.leftoverKeys,
      leftoverMaxPttlMs: l.leftoverMaxPttlMs,
    },
    examples,
    anomalyFaults,
  };
}

/** Fault windows of a history (an unfinished fault runs to the end). */
function faultWindows(history: ScenarioResult["history"]): { kind: string; start: number; end: number }[] {
  const open = new Map<number, { kind: string; start: number }>();
  const windows: { kind: string; start: number; end: number }[] = [];
  for (const e of history) {
    if (e.f === "fault-start") open.set(e.fault.id, { kind: e.fault.kind, start: e.t });
    if (e.f === "fault-end") {
      const o = open.get(e.fault.id);
      if (o) windows.push({ ...o, end: e.t });
      open.delete(e.fault.id);
    }
  }
  for (const o of open.values()) windows.push({ ...o, end: Number.POSITIVE_INFINITY });
  return windows;
}

/** The summary table, as Markdown (it reads fine in a terminal too). */
export function summaryTable(summaries: readonly ScenarioSummary[]): string {
  const header = [
    "scenario",
    "kind",
    "q/N",
    "ops",
    "faults",
    "C1 overlap",
    "C2 over-claim",
    "C3 foreign",
    "C4 lost (unfenced/fenced)",
    "C6/C7 permits/rw",
    "acquire p50/p99 ms",
    "success",
    "verdict",
  ];
  const rows = summaries.map((s) => {
    const faultCount = Object.values(s.faults).reduce((a, b) => a + b, 0);
    const a = s.anomalies;
    const fenced = a.lostFenced === null ? "n/a" : String(a.lostFenced);
    const rate = s.liveness.successRate === null ? "–" : `${Math.round(s.liveness.successRate * 100)}%`;
    const latency =
      s.liveness.p50Ms === null ? "–" : `${Math.round(s.liveness.p50Ms)}/${Math.round(s.liveness.p99Ms ?? 0)}`;
    return [
      s.name,
      s.kind,
      `${s.config.quorum}/${s.config.nodes}`,
      String(s.operations),
      String(faultCount),
      String(a.overlap),
      String(a.overClaim),
      String(a.foreignTouch),
      `${a.lostUnfenced}/${fenced}`,
      `${a.overPermits}/${a.readWrite}`,
      latency,
      rate,
      s.pass ? { safe: "clean", control: "fired", finding: "reproduced" }[s.kind] : `FAIL: ${s.reasons.join("; ")}`,
    ];
  });
  const line = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}
