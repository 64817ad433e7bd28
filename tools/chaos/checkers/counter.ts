/**
 * Checker 4, lost updates on a protected counter. Under the lock a client reads the counter and
 * writes `read + 1`; the store answers with the value the write replaced. A write that replaced
 * anything but what its client read has overwritten someone else's increment: a lost update.
 *
 * Two counters per resource: "unfenced" (plain read and write: only the lock protects it) and
 * "fenced" (the store accepts a read or write only with a fencing token at least the largest it
 * has seen, checked atomically). The fenced one is exercised only when the library hands out
 * fencing tokens (`lock.fence`); until then the history records `fencing: unavailable`.
 * @module
 */
import type { CounterEvent, HistoryEvent, InfoEvent } from "../history.js";

/** One lost update. */
export interface LostUpdate {
  readonly process: string;
  readonly resource: string;
  readonly variant: "unfenced" | "fenced";
  readonly t: number;
  readonly read: number;
  readonly prev: number;
}

/** Per-variant figures. */
export interface CounterFigures {
  /** Writes the store acknowledged (and, fenced, accepted). */
  readonly writes: number;
  /** Fenced: reads or writes refused because a newer token had been seen. */
  readonly rejected: number;
  readonly anomalies: readonly LostUpdate[];
}

/** What checker 4 found. */
export interface CounterResult {
  readonly unfenced: CounterFigures;
  /** `undefined` when the library offered no fencing token during the run. */
  readonly fenced: CounterFigures | undefined;
  readonly fencingAvailable: boolean;
}

/** Checks every counter write. */
export function checkCounters(history: readonly HistoryEvent[]): CounterResult {
  const figures = { unfenced: empty(), fenced: empty() };
  let fencingAvailable = false;
  for (const e of history) {
    if (e.f === "fencing") {
      if ((e as InfoEvent).data?.available === true) fencingAvailable = true;
      continue;
    }
    if (e.f !== "read" && e.f !== "write") continue;
    const c = e as CounterEvent;
    const into = figures[c.variant];
    if (c.accepted === false) {
      into.rejected++;
      continue;
    }
    if (c.f !== "write" || c.type !== "ok" || c.prev === undefined || c.read === undefined) continue;
    into.writes++;
    if (c.prev !== c.read) {
      into.anomalies.push({
        process: c.process,
        resource: c.resource,
        variant: c.variant,
        t: c.t,
        read: c.read,
        prev: c.prev,
      });
    }
  }
  return {
    unfenced: figures.unfenced,
    fenced: fencingAvailable ? figures.fenced : undefined,
    fencingAvailable,
  };
}

function empty(): { writes: number; rejected: number; anomalies: LostUpdate[] } {
  return { writes: 0, rejected: 0, anomalies: [] };
}
