/**
 * Checker 5, liveness figures (reported, not pass/fail): acquire success rate overall and while no
 * fault was active, acquire latency percentiles, time to re-acquire after a holder died, and the
 * keys left on the nodes after every client finished.
 * @module
 */
import type { FaultEvent, HistoryEvent, InfoEvent, LockEvent } from "../history.js";

/** Liveness figures of a run. */
export interface LivenessResult {
  /** acquire() calls (each may retry internally). */
  readonly acquires: number;
  readonly acquired: number;
  /** acquired / acquires, in [0, 1] (NaN without acquires). */
  readonly successRate: number;
  /** The same, counting only acquires invoked while no fault was active. */
  readonly healthySuccessRate: number;
  /** Latency of successful acquires, ms. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** For each holder killed while holding: ms from the kill to the next grant of its resource. */
  readonly reacquireAfterDeathMs: readonly number[];
  /** Lock keys found on the nodes after the run, and the longest PTTL among them. */
  readonly leftoverKeys: number;
  readonly leftoverMaxPttlMs: number;
}

/** Computes the liveness figures. */
export function checkLiveness(history: readonly HistoryEvent[]): LivenessResult {
  const faults: { start: number; end: number }[] = [];
  const open = new Map<number, number>();
  const deaths: { t: number; resource: string }[] = [];
  for (const e of history) {
    if (e.f === "fault-start") {
      const f = (e as FaultEvent).fault;
      open.set(f.id, e.t);
      const resource = f.params?.holding;
      if (f.kind === "kill-client" && typeof resource === "string") deaths.push({ t: e.t, resource });
    } else if (e.f === "fault-end") {
      const f = (e as FaultEvent).fault;
      faults.push({ start: open.get(f.id) ?? e.t, end: e.t });
      open.delete(f.id);
    }
  }
  for (const start of open.values()) faults.push({ start, end: Number.POSITIVE_INFINITY });
  const faultAt = (t: number) => faults.some((f) => t >= f.start && t <= f.end);

  const invokes = new Map<string, number>();
  let acquires = 0;
  let acquired = 0;
  let healthy = 0;
  let healthyOk = 0;
  const latencies: number[] = [];
  const grants: { t: number; resource: string }[] = [];
  for (const e of history) {
    if (e.f !== "acquire") continue;
    const l = e as LockEvent;
    if (l.type === "invoke") {
      acquires++;
      invokes.set(l.process, l.t);
      if (!faultAt(l.t)) healthy++;
    } else if (l.type === "ok" || l.type === "fail") {
      const invokedAt = invokes.get(l.process);
      if (l.type === "ok") {
        acquired++;
        grants.push({ t: l.t, resource: l.resource });
        if (invokedAt !== undefined) latencies.push(l.t - invokedAt);
        if (invokedAt !== undefined && !faultAt(invokedAt)) healthyOk++;
      }
    }
  }
  latencies.sort((a, b) => a - b);
  const reacquireAfterDeathMs = deaths.flatMap((d) => {
    const next = grants.find((g) => g.resource === d.resource && g.t > d.t);
    return next ? [next.t - d.t] : [];
  });
  const leftover = history.find((e) => e.f === "leftover-keys") as InfoEvent | undefined;
  return {
    acquires,
    acquired,
    successRate: acquired / acquires,
    healthySuccessRate: healthyOk / healthy,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    reacquireAfterDeathMs,
    leftoverKeys: Number(leftover?.data?.keys ?? 0),
    leftoverMaxPttlMs: Number(leftover?.data?.maxPttlMs ?? 0),
  };
}

/** Nearest-rank percentile of sorted values (NaN when empty). */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}
