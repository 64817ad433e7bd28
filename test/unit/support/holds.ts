/**
 * Histories of who held a lock when, as the isolates tests record them, and the checks they run
 * on them: overlapping holds and fairness across isolates.
 */

/** One critical section: the isolate that ran it, and when it started and ended. */
export interface Hold {
  readonly isolate: number;
  readonly start: number;
  readonly end: number;
}

/** Pairs of holds whose windows overlap, in a history sorted by start. */
export function overlaps(holds: readonly Hold[]): number {
  let count = 0;
  for (let i = 1; i < holds.length; i++) if ((holds[i] as Hold).start < (holds[i - 1] as Hold).end) count++;
  return count;
}

/** Jain's fairness index of the holds per isolate (1: every one of `isolates` served equally). */
export function jainOf(holds: readonly Hold[], isolates: number): number {
  const grants = Array.from({ length: isolates }, (_, k) => holds.filter((h) => h.isolate === k).length);
  return holds.length ** 2 / (isolates * grants.reduce((sum, g) => sum + g * g, 0));
}

/** The mean time from one hold's end to the next one's start, in whole ms, in a history sorted by start. */
export function meanHandoffMs(holds: readonly Hold[]): number {
  const gaps = holds.slice(1).map((h, i) => h.start - (holds[i] as Hold).end);
  return Math.round(gaps.reduce((a, b) => a + b, 0) / gaps.length);
}
