/** Builders of hand-written histories for the checker tests. */
import type { AuditedNode, HistoryEvent, MonitorEvent } from "../../../tools/chaos/history.js";

/** A grant: acquire invoke + ok, optionally extended and released. */
export function grant(
  process: string,
  lock: string,
  o: {
    resource?: string;
    /** A lock of several resources: all of them (`resource` is then the first). */
    resources?: string[];
    acquiredAt: number;
    claimedUntil: number;
    extensions?: { at: number; claimedUntil: number }[];
    releaseAt?: number;
    lostAt?: number;
  },
): HistoryEvent[] {
  const resource = o.resources?.[0] ?? o.resource ?? "r";
  const all = o.resources ? { resources: o.resources } : {};
  const events: HistoryEvent[] = [
    { t: o.acquiredAt - 5, process, type: "invoke", f: "acquire", resource, ...all, ttl: 1000 },
    { t: o.acquiredAt, process, type: "ok", f: "acquire", resource, ...all, lock, claimedDeadline: o.claimedUntil },
  ];
  for (const e of o.extensions ?? []) {
    events.push({ t: e.at, process, type: "ok", f: "extend", resource, lock, claimedDeadline: e.claimedUntil });
  }
  if (o.lostAt !== undefined) events.push({ t: o.lostAt, process, type: "info", f: "lost", resource, lock });
  if (o.releaseAt !== undefined) {
    events.push({ t: o.releaseAt, process, type: "invoke", f: "release", resource, lock });
    events.push({ t: o.releaseAt + 2, process, type: "ok", f: "release", resource, lock, released: 5 });
  }
  return events;
}

/** An audit: each node `[sentAt, receivedAt, pttl]` (holds the token), `false` (does not), or `null` (silent). */
export function audit(
  claimedDeadline: number,
  nodes: readonly ([number, number, number] | false | null)[],
  t = 0,
): HistoryEvent {
  return {
    t,
    process: "c0",
    type: "ok",
    f: "audit",
    resource: "r",
    lock: "aaaa",
    after: "acquire",
    claimedDeadline,
    nodes: nodes.map((n, i): AuditedNode => {
      if (n === null) return { i, sentAt: t, receivedAt: t + 1, holds: null };
      if (n === false) return { i, sentAt: t, receivedAt: t + 1, holds: false };
      return { i, sentAt: n[0], receivedAt: n[1], holds: true, pttl: n[2] };
    }),
  };
}

/** A MONITOR stream of one node from compact lines. */
export function monitorStream(
  node: number,
  lines: (Partial<MonitorEvent> & { t: number; cmd: string })[],
): MonitorEvent[] {
  return lines.map((l, seq) => ({
    process: `node${node}`,
    type: "info",
    f: "monitor",
    node,
    seq,
    source: "client",
    ...l,
  }));
}
