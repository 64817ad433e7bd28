/**
 * Checker 2, second source: the nodes' own log. At the end of every claimed window (the claimed
 * deadline, or the release or loss that cut it), enough nodes must still possibly hold the grant's
 * token that no other client can assemble a quorum: at least N − q + 1, according to the replay
 * of their MONITOR streams. (Right after the operation the audit asks for a full quorum; later, a
 * node that forgot the key is what an f-tolerant quorum is sized for, so the log asks for what
 * mutual exclusion needs.)
 *
 * The audit (claims.ts) reads the nodes once, right after the operation; this catches what lands
 * later: a request the client gave up on (an extension with a shorter TTL that timed out on the
 * client but ran on the node afterwards), forgotten keys, shortened TTLs. The replay keeps every
 * state it cannot rule out, so a node counts as holding unless its log proves it does not.
 * @module
 */
import type { HistoryEvent } from "../history.js";
import { grantsOf } from "./grants.js";
import { monitorStreams, NodeReplay } from "./replay.js";

/** A claim the nodes' log does not back. */
export interface UnbackedClaim {
  readonly process: string;
  readonly resource: string;
  readonly lock: string;
  /** The instant checked: the end of a claimed window. */
  readonly t: number;
  /** Nodes that may still hold the token then. */
  readonly holders: readonly number[];
  /**
   * Nodes whose log shows the grant's own release (a release script called with its token)
   * arriving at or before `t`, and by how much, in ms. The release was invoked no earlier than the
   * end of the claim, so in real time it reached every node after `t`: an entry here means the
   * client's clock ran ahead of the nodes' by at least that much, and what the replay saw
   * "gone" at `t` on those nodes is the holder's own release, not a lost key. Present only when
   * non-empty.
   */
  readonly ownReleaseLoggedEarly?: readonly { readonly node: number; readonly earlyMs: number }[];
}

/** What the log half of checker 2 found. */
export interface BackingResult {
  /** Claimed window ends checked. */
  readonly checked: number;
  readonly anomalies: readonly UnbackedClaim[];
  /**
   * Window ends that looked unbacked only because nodes logged the holder's own release before
   * the client's clock says it was invoked (see {@link UnbackedClaim.ownReleaseLoggedEarly}):
   * checked again on those nodes just before that release arrived, they were backed. Reported
   * with the largest skew seen, not counted as anomalies.
   */
  readonly clockSkewed?: { readonly count: number; readonly maxEarlyMs: number };
  /**
   * Window ends that looked unbacked at the instant the client's corrected clock gives, but were
   * backed at another instant within its handshake's bound (`Grant.clockUncertaintyMs`): the
   * checker cannot tell which was the real one, so it reports no anomaly it is not sure of.
   * Reported with the largest bound used; a tight handshake leaves little room here.
   */
  readonly clockUncertain?: { readonly count: number; readonly maxUncertaintyMs: number };
}

/** Checks every claimed window end against the replayed nodes. */
export function checkBacking(
  history: readonly HistoryEvent[],
  nodes: number,
  quorum: number,
  maxTtlMs: number,
): BackingResult {
  const needed = nodes - quorum + 1;
  const streams = monitorStreams(history);
  if (streams.size === 0) return { checked: 0, anomalies: [] };
  type Query = { t: number; key: string; lock: string; process: string; holders: number[] };
  const queries: Query[] = [];
  const uncertainty = new Map<string, number>();
  for (const g of grantsOf(history)) {
    uncertainty.set(`${g.process}|${g.lock}`, g.clockUncertaintyMs);
    for (const w of g.windows) {
      if (Number.isFinite(w.end))
        queries.push({ t: w.end, key: g.resource, lock: g.lock, process: g.process, holders: [] });
    }
  }
  queries.sort((a, b) => a.t - b.t);
  for (const [node, events] of streams) {
    const replay = new NodeReplay(maxTtlMs);
    let next = 0;
    for (const query of queries) {
      // Apply everything the node did up to the queried instant, then ask.
      while (next < events.length && (events[next]?.t ?? Number.POSITIVE_INFINITY) <= query.t) {
        replay.apply(events[next] as (typeof events)[number]);
        next++;
      }
      if (replay.mayHold(query.key, query.lock, query.t)) query.holders.push(node);
    }
  }
  // Where each token's own release first reached each node, by the node's clock.
  const releasedAt = new Map<string, Map<number, number>>();
  for (const [node, events] of streams) {
    for (const e of events) {
      if (e.f !== "monitor" || e.source !== "client" || e.script !== "release" || !e.key || !e.value) continue;
      const id = `${e.key}|${e.value}`;
      const perNode = releasedAt.get(id) ?? new Map<number, number>();
      if (!perNode.has(node)) perNode.set(node, e.t);
      releasedAt.set(id, perNode);
    }
  }
  const unbacked = queries
    .filter((q) => q.holders.length < needed)
    .map((q): UnbackedClaim => {
      const early = [...(releasedAt.get(`${q.key}|${q.lock}`) ?? new Map<number, number>())]
        .filter(([, t]) => t <= q.t)
        .map(([node, t]) => ({ node, earlyMs: q.t - t }))
        .sort((a, b) => a.node - b.node);
      const anomaly = { process: q.process, resource: q.key, lock: q.lock, t: q.t, holders: q.holders };
      return early.length > 0 ? { ...anomaly, ownReleaseLoggedEarly: early } : anomaly;
    });
  // The holder's own release reached a node after the holder invoked it, so after its claim
  // ended: a node that logged it before `t` has a clock behind the client's. Such a node is asked
  // again just before that release arrived, which in real time is after the claim's end: a key
  // that held the token then held it at the end too (only the grant's own SET writes its token,
  // and a key that had not expired then had not expired earlier).
  const anomalies: UnbackedClaim[] = [];
  let skewed = 0;
  let maxEarlyMs = 0;
  let uncertain = 0;
  let maxUncertaintyMs = 0;
  for (const claim of unbacked) {
    const early = claim.ownReleaseLoggedEarly ?? [];
    const backedBefore = early.filter(({ node, earlyMs }) =>
      heldJustBefore(streams.get(node) ?? [], claim.resource, claim.lock, claim.t - earlyMs, maxTtlMs),
    );
    if (early.length > 0 && claim.holders.length + backedBefore.length >= needed) {
      skewed++;
      for (const { earlyMs } of early) maxEarlyMs = Math.max(maxEarlyMs, earlyMs);
      continue;
    }
    const u = uncertainty.get(`${claim.process}|${claim.lock}`) ?? 0;
    if (u > 0 && mostHoldersWithin(streams, claim, claim.t - u, claim.t + u, maxTtlMs) >= needed) {
      uncertain++;
      maxUncertaintyMs = Math.max(maxUncertaintyMs, u);
      continue;
    }
    anomalies.push(claim);
  }
  return {
    checked: queries.length,
    anomalies,
    ...(skewed > 0 ? { clockSkewed: { count: skewed, maxEarlyMs } } : {}),
    ...(uncertain > 0 ? { clockUncertain: { count: uncertain, maxUncertaintyMs } } : {}),
  };
}

/**
 * The most nodes whose replayed logs may hold the claim's token at one instant of `[from, to]`:
 * the count changes only at a logged event, so the instants checked are `from` and each event in
 * the interval.
 */
function mostHoldersWithin(
  streams: ReadonlyMap<number, readonly NodeEvent[]>,
  claim: UnbackedClaim,
  from: number,
  to: number,
  maxTtlMs: number,
): number {
  const instants = new Set<number>([from]);
  for (const events of streams.values()) for (const e of events) if (e.t > from && e.t <= to) instants.add(e.t);
  let most = 0;
  for (const t of instants) {
    let holders = 0;
    for (const events of streams.values()) if (mayHoldAt(events, claim.resource, claim.lock, t, maxTtlMs)) holders++;
    most = Math.max(most, holders);
  }
  return most;
}

/** One event of a node's log, as the replay reads it. */
type NodeEvent = Parameters<NodeReplay["apply"]>[0];

/** Whether a node's replayed log may hold `token` under `key` right before instant `t`. */
function heldJustBefore(
  events: readonly NodeEvent[],
  key: string,
  token: string,
  t: number,
  maxTtlMs: number,
): boolean {
  return mayHoldAt(events, key, token, t, maxTtlMs, true);
}

/**
 * Whether a node's log may hold `token` under `key` at instant `t`, its events at `t` included
 * (`justBefore`: its events before `t` only, asked a microsecond before).
 */
function mayHoldAt(
  events: readonly NodeEvent[],
  key: string,
  token: string,
  t: number,
  maxTtlMs: number,
  justBefore = false,
): boolean {
  const replay = new NodeReplay(maxTtlMs);
  for (const e of events) {
    if (justBefore ? e.t >= t : e.t > t) break;
    replay.apply(e);
  }
  return replay.mayHold(key, token, justBefore ? t - 0.001 : t);
}
