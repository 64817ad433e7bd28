/**
 * Grants reconstructed from a history: who held which resource, and the windows over which the
 * lock claimed to be held.
 * @module
 */
import type { HistoryEvent, LockEvent } from "../history.js";

/** A time interval on the harness clock. */
export interface Window {
  readonly start: number;
  readonly end: number;
}

/** One successful acquisition and what it claimed until it was released or withdrawn. */
export interface Grant {
  readonly process: string;
  readonly resource: string;
  readonly lock: string;
  /** Harness time the acquire returned. */
  readonly acquiredAt: number;
  /** Release invoke time, or the time the lock's signal aborted (the claim was withdrawn), if any. */
  readonly endedAt: number | undefined;
  /**
   * How far its times may be from the harness clock: the bound of its process's handshake (the
   * offset it measured, corrected for, is exact only within this), ms.
   */
  readonly clockUncertaintyMs: number;
  /**
   * Claimed windows: `[acquire ok, claimed deadline]`, then `[extend ok, new claimed deadline]`
   * for every extension, each cut at `endedAt`. Their union is when the lock claimed to be held.
   */
  readonly windows: readonly Window[];
}

/**
 * Rebuilds the grants, one per resource of each lock. A grant's claim ends at the earliest of: the release invoke, a `lost` event
 * (the library aborted the lock's signal: it no longer claims the lock), and each claimed deadline.
 */
export function grantsOf(history: readonly HistoryEvent[]): Grant[] {
  const clocks = clocksOf(history);
  type Draft = {
    process: string;
    resources: readonly string[];
    lock: string;
    acquiredAt: number;
    claims: Window[];
    endedAt?: number;
  };
  const drafts = new Map<string, Draft>();
  for (const e of history) {
    if (e.f !== "acquire" && e.f !== "extend" && e.f !== "release" && e.f !== "lost") continue;
    const lock = (e as LockEvent).lock;
    if (lock === undefined) continue;
    const key = `${e.process}/${lock}`;
    // The client's readings, on the harness clock: corrected by the offset its handshake measured.
    const offset = clockOf(clocks, e.process).offsetMs;
    const t = e.t - offset;
    if (e.f === "acquire" && e.type === "ok") {
      drafts.set(key, {
        process: e.process,
        resources: (e as LockEvent).resources ?? [e.resource],
        lock,
        acquiredAt: t,
        claims: [{ start: t, end: ((e as LockEvent).claimedDeadline as number) - offset }],
      });
      continue;
    }
    const draft = drafts.get(key);
    if (!draft) continue;
    if (e.f === "extend" && e.type === "ok") {
      draft.claims.push({ start: t, end: ((e as LockEvent).claimedDeadline as number) - offset });
    } else if ((e.f === "release" && e.type === "invoke") || e.f === "lost") {
      draft.endedAt = Math.min(draft.endedAt ?? Number.POSITIVE_INFINITY, t);
    }
  }
  // A lock of several resources is a claim on each of them: one grant per resource.
  return [...drafts.values()].flatMap((d) => {
    const windows = d.claims
      .map((w) => ({ start: w.start, end: Math.min(w.end, d.endedAt ?? Number.POSITIVE_INFINITY) }))
      .filter((w) => w.end > w.start);
    return d.resources.map((resource) => ({
      process: d.process,
      resource,
      lock: d.lock,
      acquiredAt: d.acquiredAt,
      endedAt: d.endedAt,
      clockUncertaintyMs: clockOf(clocks, d.process).uncertaintyMs,
      windows,
    }));
  });
}

/** A client process's clock against the harness clock, as its handshake measured it. */
interface ClientClock {
  readonly offsetMs: number;
  readonly uncertaintyMs: number;
}

/**
 * The measured clocks of the client processes, by process id (`clock-offset` events). A process
 * reads `performance.timeOrigin + performance.now()`; its `timeOrigin` is usually within a
 * fraction of a millisecond of the harness's, but a process started on a loaded machine has been
 * measured 85 ms off, enough to make grants of two processes look as if they overlapped.
 */
function clocksOf(history: readonly HistoryEvent[]): Map<string, ClientClock> {
  const clocks = new Map<string, ClientClock>();
  for (const e of history) {
    if (e.f !== "clock-offset") continue;
    const data = (e as { data?: { client?: unknown; offsetMs?: unknown; uncertaintyMs?: unknown } }).data;
    if (typeof data?.client !== "string" || typeof data.offsetMs !== "number") continue;
    clocks.set(data.client, {
      offsetMs: data.offsetMs,
      uncertaintyMs: typeof data.uncertaintyMs === "number" ? data.uncertaintyMs : 0,
    });
  }
  return clocks;
}

/** The clock of the process of worker `process` ("c0" or its worker "c0.1"); none measured: exact. */
function clockOf(clocks: ReadonlyMap<string, ClientClock>, process: string): ClientClock {
  return clocks.get(process) ?? clocks.get(process.split(".")[0] as string) ?? { offsetMs: 0, uncertaintyMs: 0 };
}
