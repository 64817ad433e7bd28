/**
 * Checkers of the semaphore and the read-write lock, over claimed windows (what clients believed
 * they held, and when) and over what the nodes themselves hold.
 * - Permits: at no moment more than `permits` claimed windows of one semaphore overlap.
 * - Read-write: no write window overlaps any other window (read or write) of the same lock.
 * - On the nodes: no more than `permits` tokens of one semaphore are each on a quorum of nodes, and
 *   no writer is on a quorum while another writer or a reader is.
 * Pure functions: the tests and the chaos harness feed them.
 * @module
 */

/** A claimed window `[start, end)`, on one clock, of one holder. */
export interface Window {
  readonly holder: string;
  readonly start: number;
  readonly end: number;
}

/** The most windows open at once, and when (the first moment it was reached). */
export function mostAtOnce(
  windows: readonly Window[],
  toleranceMs = 0,
): { count: number; at: number; holders: string[] } {
  // Each window shrunk by the tolerance at both ends, so that readings a tolerance apart do not count.
  const events: { at: number; open: boolean; holder: string }[] = [];
  for (const w of windows) {
    const start = w.start + toleranceMs;
    const end = w.end - toleranceMs;
    if (end <= start) continue;
    events.push({ at: start, open: true, holder: w.holder }, { at: end, open: false, holder: w.holder });
  }
  // A window that ends where another starts does not overlap it: closes first.
  events.sort((a, b) => a.at - b.at || Number(a.open) - Number(b.open));
  const open = new Set<string>();
  let best = { count: 0, at: Number.NaN, holders: [] as string[] };
  for (const event of events) {
    if (event.open) open.add(event.holder);
    else open.delete(event.holder);
    if (open.size > best.count) best = { count: open.size, at: event.at, holders: [...open] };
  }
  return best;
}

/** What the permit checker found for one semaphore. */
export interface PermitResult {
  readonly windows: number;
  /** The most claimed windows open at once. */
  readonly mostAtOnce: number;
  /** Set when more than `permits` windows were open at once. */
  readonly anomaly?: { readonly at: number; readonly holders: readonly string[] } | undefined;
}

/** At most `permits` claimed windows of one semaphore open at any moment. */
export function checkPermits(windows: readonly Window[], permits: number, toleranceMs = 0): PermitResult {
  const most = mostAtOnce(windows, toleranceMs);
  const anomaly = most.count > permits ? { at: most.at, holders: most.holders } : undefined;
  return { windows: windows.length, mostAtOnce: most.count, anomaly };
}

/** A claimed window of a read or write lock. */
export interface ModeWindow extends Window {
  readonly mode: "read" | "write";
}

/** A write window that overlaps another window of the same lock. */
export interface ReadWriteAnomaly {
  readonly writer: string;
  readonly other: string;
  readonly otherMode: "read" | "write";
  readonly start: number;
  readonly end: number;
}

/** No write window overlaps any other window of the same lock (readers may overlap each other). */
export function checkReadWrite(windows: readonly ModeWindow[], toleranceMs = 0): ReadWriteAnomaly[] {
  const anomalies: ReadWriteAnomaly[] = [];
  for (let i = 0; i < windows.length; i++) {
    for (let j = i + 1; j < windows.length; j++) {
      const a = windows[i] as ModeWindow;
      const b = windows[j] as ModeWindow;
      if (a.mode === "read" && b.mode === "read") continue;
      const [writer, other] = a.mode === "write" ? [a, b] : [b, a];
      const start = Math.max(a.start, b.start);
      const end = Math.min(a.end, b.end);
      if (end - start > 2 * toleranceMs) {
        anomalies.push({ writer: writer.holder, other: other.holder, otherMode: other.mode, start, end });
      }
    }
  }
  return anomalies;
}

/** The tokens found on at least `quorum` of the nodes (each node's holders given as a set). */
export function onQuorum(perNode: readonly ReadonlySet<string>[], quorum: number): string[] {
  const count = new Map<string, number>();
  for (const holders of perNode) for (const token of holders) count.set(token, (count.get(token) ?? 0) + 1);
  return [...count].filter(([, n]) => n >= quorum).map(([token]) => token);
}

/** What one node holds for a read-write lock: its writer's token, if any, and its live readers. */
export interface ReadWriteNodeState {
  readonly writer: string | undefined;
  readonly readers: ReadonlySet<string>;
}

/**
 * On the nodes: a writer on a quorum beside another writer or a reader on a quorum. Returns the
 * offending tokens, empty when the state is one a read-write lock may be in.
 */
export function readWriteConflicts(perNode: readonly ReadWriteNodeState[], quorum: number): string[] {
  const writers = onQuorum(
    perNode.map((n) => new Set(n.writer === undefined ? [] : [n.writer])),
    quorum,
  );
  const readers = onQuorum(
    perNode.map((n) => n.readers),
    quorum,
  );
  if (writers.length === 0 || writers.length + readers.length === 1) return [];
  return [...writers, ...readers];
}

/** What checkers 6 and 7 found in a history. */
export interface PrimitiveResult {
  /** Grants of permits and of read or write locks. */
  readonly grants: number;
  /** C6: per semaphore, the most permits claimed at once, and the moment it went over its permits. */
  readonly permits: readonly (PermitResult & { readonly resource: string; readonly permits: number })[];
  /** C7: write windows overlapping another window of the same read-write lock. */
  readonly readWrite: readonly (ReadWriteAnomaly & { readonly resource: string })[];
}

/** A grant's claimed windows and how it was recorded (see `grantsOf`). */
export interface PrimitiveGrant {
  readonly resource: string;
  readonly holder: string;
  readonly mode: "permit" | "read" | "write";
  readonly permits?: number | undefined;
  readonly windows: readonly { readonly start: number; readonly end: number }[];
}

/**
 * Checkers 6 and 7 over the grants of primitives: no more claimed windows of one semaphore open at
 * once than its permits, and no write window of a read-write lock beside any other window of it.
 * Each grant's windows (its acquisition, then each extension) are merged first: one holder counts
 * once. Readings of two processes, each corrected by its measured clock offset (see `grantsOf`),
 * are compared within `toleranceMs`.
 */
export function checkPrimitiveGrants(grants: readonly PrimitiveGrant[], toleranceMs: number): PrimitiveResult {
  const byResource = new Map<string, PrimitiveGrant[]>();
  for (const grant of grants) byResource.set(grant.resource, [...(byResource.get(grant.resource) ?? []), grant]);
  const permits: (PermitResult & { resource: string; permits: number })[] = [];
  const readWrite: (ReadWriteAnomaly & { resource: string })[] = [];
  for (const [resource, list] of byResource) {
    const windows = list.flatMap((g) => merged(g.windows).map((w) => ({ ...w, holder: g.holder, mode: g.mode })));
    const semaphore = list.find((g) => g.mode === "permit");
    if (semaphore) {
      const limit = semaphore.permits ?? 1;
      permits.push({ resource, permits: limit, ...checkPermits(windows, limit, toleranceMs) });
    } else {
      const sides = windows.map((w) => ({ ...w, mode: w.mode as "read" | "write" }));
      for (const anomaly of checkReadWrite(sides, toleranceMs)) {
        // Two windows of one grant (an extension) are never an anomaly.
        if (anomaly.writer !== anomaly.other) readWrite.push({ resource, ...anomaly });
      }
    }
  }
  return { grants: grants.length, permits, readWrite };
}

/** The union of intervals, as disjoint intervals. */
function merged(windows: readonly { start: number; end: number }[]): { start: number; end: number }[] {
  const sorted = [...windows].sort((a, b) => a.start - b.start);
  const out: { start: number; end: number }[] = [];
  for (const w of sorted) {
    const last = out.at(-1);
    if (last && w.start <= last.end) last.end = Math.max(last.end, w.end);
    else out.push({ start: w.start, end: w.end });
  }
  return out;
}
