/** The tables, targets and notes of the isolates parts (./isolates.ts). */
import type { PartResult, Table } from "../context.js";
import {
  GEO_DATA_REGION,
  GEO_NODE_REGIONS,
  GEO_SOURCE,
  geoTableRows,
  type LatencyProfile,
  quorumRtt,
} from "../isolate-latency.js";
import { fmt, median, quantile } from "../stats.js";
import { SYSTEMS } from "../systems.js";
import type { IsolatePlan, IsolateRun } from "./isolates.js";

/** The Workers Free plan's subrequests per invocation: acquire + release must fit. */
export const WORKERS_FREE_SUBREQUESTS = 50;

/** The largest value (NaN when empty), without spreading a long array into arguments. */
const maxOf = (values: readonly number[]) =>
  values.length === 0 ? Number.NaN : values.reduce((a, b) => Math.max(a, b));

const isPeer = (r: IsolateRun) => r.spec.id !== "edge-redlock" && r.spec.id !== "no-lock";
const isFiveNodePeer = (r: IsolateRun) => r.spec.id === "sesame-redlock" || r.spec.id === "redlock-universal";
const layout = (r: IsolateRun) => `${r.p} × ${r.callers}`;

function best(runs: IsolateRun[], r: IsolateRun, which: (x: IsolateRun) => boolean): IsolateRun | undefined {
  return runs
    .filter((x) => x.p === r.p && x.callers === r.callers && which(x))
    .sort((a, b) => b.handoffsPerS - a.handoffsPerS)[0];
}

function method(part: PartResult, profile: LatencyProfile, s: IsolatePlan, baseMs: number): void {
  part.method.push(
    `P client processes stand in for P isolates (forked fresh for every run and ended after it): each has its own client of the system under test, its own \`fetch\`, its own ioredis connections and its own latency to every node. C callers per process (P × C) share that one client, as the requests an isolate serves at once share its module-level client. Every caller loops acquire (TTL ${TTL_S} s) → critical section → release on one key for ${s.windowMs / 1000} s; after a give-up it calls acquire() again. N = ${s.n} lock nodes (@upstash/lock: node 0 alone).`,
    ...profile.method,
    `The latency is added in each client process, not at the nodes: its \`fetch\` holds every request back by half its round trip before sending it and the answer by the other half (so a command runs at a node when it would have arrived there); TCP peers go through one delaying proxy per node inside the process, with the same two halves. One request's loopback cost (the fastest of 20 requests to a node, measured at the start of the part: ${fmt(baseMs, 2)} ms) comes on top.`,
    "Critical section: two round trips to a separate data node: `INCR holders` + `GET counter`, then `SET counter+1` + `DECR holders`. holders > 1 counts an overlapping hold; a final counter below the acknowledged sections counts lost updates.",
    `Requests are counted in each client process: every request to a lock node through its \`fetch\` (REST systems: HTTP requests, what Workers count as subrequests) or its ioredis connections (TCP systems: commands). Per acquire() call: the requests sent from the async context of that call and of the release of the lock it got (AsyncLocalStorage, as a Workers invocation is charged for its own subrequests), for every call started inside the window; p50, p99 and max over every call of every round. Requests/handoff: every request to a lock node inside the window ÷ handoffs. Outside calls/handoff: those sent while no acquire() or release() of their own was running (work left in the background). After the window no caller starts a new call, and the processes report once every call ended or ${s.drainMs / 1000} s after the window; calls cut: calls still running then, their counts so far included (lower bounds).`,
    "Handoffs: sections released inside the window. Jain (callers): fairness of per-caller handoffs over the window (1 = equal); Jain (isolates): of per-process handoffs. Next in same isolate: of the sections whose successor in the key's history (the next counter value) also ran, the share whose successor ran in the same process (handed over inside the isolate, or taken again there); with the next holder drawn at random among all P × C callers it would be 1/P. Starved: callers with no handoff. Wait: from wanting the lock to holding it, across give-ups, for every handoff in the window, and for every caller still wanting the lock when the window ends the wait so far (so a system that starves callers cannot look quick). Gave up: acquire() calls that gave up inside the window (the notes name edge-redlock's reasons by error code, summed over the rounds; the peers give up for one reason only, their retries ran out).",
    "Physical floor of a fair handoff to an isolate: its critical section plus one round trip to its quorum-th nearest lock node (the release landing and the next take overlapping at best), each round trip with the loopback cost. A row's floor is the mean over its isolates (each served equally often), on the nodes its system locks on; a row above its floor served the near isolates more often (see Jain). ÷ floor: handoffs/s ÷ (1000 / floor); over floor: 1000 / handoffs/s − floor, in ms per handoff.",
    `Rounds: every system and layout runs once per round, ${s.rounds} interleaved round${s.rounds > 1 ? "s" : ""} in this run (the systems' order rotates with every round and layout); rates, fairness, waits and requests per handoff are medians over the rounds ("rounds" lists each round's handoffs/s); lost updates, overlaps, errors and cut calls are sums. The load average at the start of each round is in the notes.`,
    "÷ best peer: edge-redlock's handoffs/s over the highest of the peers' (either policy) in the same layout; ÷ best 5-node peer: over the highest of @sesamecare-oss/redlock's and redlock-universal's. edge-redlock (retryDelay): `maxAttempts: 10, retryDelay: () => 100`, as a user migrating from node-redlock writes it.",
    "Not modelled: Workers' 6 simultaneous connections per invocation and CPU limits. The nodes (redis-server + REST bridge) all run on this machine, in one node host process.",
  );
}

const TTL_S = 10;

const COLUMNS = [
  "P × C",
  "system",
  "handoffs/s",
  "rounds",
  "÷ best peer",
  "÷ best 5-node peer",
  "floor ms",
  "÷ floor",
  "over floor ms",
  "next in same isolate",
  "Jain (callers)",
  "Jain (isolates)",
  "starved",
  "wait p50 ms",
  "wait p99 ms",
  "requests/handoff",
  "outside calls/handoff",
  "per call p50",
  "per call p99",
  "per call max",
  "calls cut",
  "gave up",
  "lost updates",
  "overlaps",
];

function totalsRow(runs: IsolateRun[], r: IsolateRun): string[] {
  const own = r.spec.id === "edge-redlock";
  const peer = best(runs, r, isPeer);
  const five = best(runs, r, isFiveNodePeer);
  const unit = r.spec.id === "sesame-redlock" || r.spec.id === "redlock-universal" ? " cmd" : "";
  return [
    layout(r),
    r.label,
    fmt(r.handoffsPerS, 1),
    r.rounds.map((x) => fmt(x, 1)).join(" / "),
    own && peer ? `${(r.handoffsPerS / peer.handoffsPerS).toFixed(2)}×` : "",
    own && five ? `${(r.handoffsPerS / five.handoffsPerS).toFixed(2)}×` : "",
    fmt(r.floorMs, 0),
    Number.isFinite(r.floorMs) ? `${(r.handoffsPerS / (1000 / r.floorMs)).toFixed(2)}×` : "–",
    r.handoffsPerS > 0 && Number.isFinite(r.floorMs) ? fmt(1000 / r.handoffsPerS - r.floorMs, 0) : "–",
    Number.isFinite(r.sameIsolateNext) ? `${Math.round(r.sameIsolateNext * 100)}%` : "–",
    fmt(r.jainCallers, 2),
    fmt(r.jainIsolates, 2),
    String(r.starved),
    fmt(r.waitP50, 0),
    fmt(r.waitP99, 0),
    `${fmt(r.requestsPerHandoff, 1)}${unit}`,
    fmt(r.outsidePerHandoff, 1),
    fmt(median(r.calls), 0),
    fmt(quantile(r.calls, 0.99), 0),
    fmt(maxOf(r.calls), 0),
    String(r.cut),
    fmt(r.gaveUp, 0),
    String(r.lostUpdates),
    String(r.overlaps),
  ];
}

function perIsolateTables(profile: LatencyProfile, runs: IsolateRun[]): Table[] {
  const tables: Table[] = [];
  for (const key of [...new Set(runs.map(layout))]) {
    const group = runs.filter((r) => layout(r) === key && r.spec.id !== "no-lock");
    const first = group.find((r) => r.spec.id !== "upstash-lock") ?? group[0];
    if (!first) continue;
    tables.push({
      title: `Per isolate, ${profile.name}, ${key}: handoffs/s · wait p99 ms · most requests in one acquire() call`,
      columns: [
        "isolate",
        "region",
        `floor ms (N = ${SYSTEMS[first.spec.id].nodesUsed(first.spec.n)})`,
        ...group.map((r) => r.label),
      ],
      rows: first.isolates.map((row, k) => [
        String(k + 1),
        row.region,
        fmt(row.floorMs, 0),
        ...group.map((r) => {
          const own = r.isolates[k];
          if (!own) return "–";
          return `${fmt(own.handoffsPerS, 1)} · ${fmt(own.waitP99, 0)} · ${fmt(maxOf(own.calls), 0)}`;
        }),
      ]),
    });
  }
  return tables;
}

function geoTables(n: number): Table[] {
  const rows = geoTableRows();
  return [
    {
      title: `Geo profile: round trips (ms) from each isolate region to each node region (source: ${GEO_SOURCE})`,
      columns: [
        "isolate region",
        ...GEO_NODE_REGIONS.map((r, i) => `node ${i} (${r})`),
        `data (${GEO_DATA_REGION})`,
        `quorum-th nearest (N=${n})`,
      ],
      rows: rows.map((row) => [
        ...row,
        String(quorumRtt(row.slice(1, 1 + GEO_NODE_REGIONS.length).map(Number), Math.min(n, GEO_NODE_REGIONS.length))),
      ]),
    },
  ];
}

function checks(part: PartResult, profile: LatencyProfile, runs: IsolateRun[]): void {
  for (const r of runs.filter((x) => x.spec.id === "edge-redlock")) {
    const where = `${r.label}, ${profile.name}, ${layout(r)}, ${r.windowS} s`;
    const peer = best(runs, r, isPeer);
    const five = best(runs, r, isFiveNodePeer);
    if (r.spec.policy === "defaults") {
      if (profile.id === "uniform" && peer) {
        part.checks.push({
          target: `handoffs/s ≥ 1.1× the best peer (${where})`,
          measured: `${fmt(r.handoffsPerS)} vs ${fmt(peer.handoffsPerS)}, ${peer.label} (${(r.handoffsPerS / peer.handoffsPerS).toFixed(2)}×)`,
          pass: r.handoffsPerS >= 1.1 * peer.handoffsPerS,
        });
      }
      if (profile.id === "geo" && five) {
        part.checks.push({
          target: `handoffs/s ≥ 1.5× the best 5-node peer (${where})`,
          measured: `${fmt(r.handoffsPerS)} vs ${fmt(five.handoffsPerS)}, ${five.label} (${(r.handoffsPerS / five.handoffsPerS).toFixed(2)}×)`,
          pass: r.handoffsPerS >= 1.5 * five.handoffsPerS,
        });
      }
      if (peer) {
        part.checks.push({
          target: `wait p99 ≤ the best peer's (${where})`,
          measured: `${fmt(r.waitP99, 0)} ms vs ${fmt(peer.waitP99, 0)} ms, ${peer.label}`,
          pass: r.waitP99 <= peer.waitP99,
        });
      }
      if (r.windowS >= 30) {
        part.checks.push({
          target: `Jain fairness over callers ≥ 0.8 (${where})`,
          measured: fmt(r.jainCallers, 2),
          pass: r.jainCallers >= 0.8,
        });
      }
    }
    const most = maxOf(r.calls);
    part.checks.push({
      target: `one acquire() call and its release send ≤ ${WORKERS_FREE_SUBREQUESTS} requests (${where})`,
      measured: `max ${fmt(most, 0)}, p99 ${fmt(quantile(r.calls, 0.99), 0)}${r.cut > 0 ? `, ${r.cut} calls cut` : ""}`,
      pass: most <= WORKERS_FREE_SUBREQUESTS,
    });
    part.checks.push({
      target: `0 lost updates, 0 overlapping holds (${where})`,
      measured: `${r.lostUpdates} / ${r.overlaps}`,
      pass: r.lostUpdates === 0 && r.overlaps === 0,
    });
  }
}

/** Fills `part` with the method, tables, targets, notes and raw figures of merged runs (in display order). */
export function reportIsolates(
  part: PartResult,
  profile: LatencyProfile,
  s: IsolatePlan,
  runs: IsolateRun[],
  info: { baseMs: number; loads: string[] },
): void {
  method(part, profile, s, info.baseMs);
  const ordered = runs;
  part.tables.push({
    title: `Hot key across isolates, ${profile.name}: ${s.windowMs / 1000} s window, median of ${s.rounds} round${s.rounds > 1 ? "s" : ""}`,
    columns: COLUMNS,
    rows: ordered.map((r) => totalsRow(ordered, r)),
  });
  part.tables.push(...perIsolateTables(profile, ordered));
  if (profile.id === "geo") part.tables.push(...geoTables(s.n));
  checks(part, profile, ordered);
  part.notes.push(`Load average (1, 5, 15 min) at the start of each round: ${info.loads.join("; ")}.`);
  for (const r of ordered) {
    part.violations.push({
      label: `${r.label} ${layout(r)} ${profile.name}`,
      lostUpdates: r.lostUpdates,
      overlaps: r.overlaps,
    });
    if (r.errors > 0) part.notes.push(`${r.label}, ${layout(r)}: ${r.errors} errors, first: ${r.firstError}`);
    const reasons = Object.entries(r.gaveUpFor).sort((a, b) => b[1] - a[1]);
    if (reasons.length > 0) {
      const named = reasons.map(([code, n]) => `${code} ${n}`).join(", ");
      part.notes.push(`${r.label}, ${layout(r)}: calls gave up with ${named} (summed over the rounds).`);
    }
  }
  part.figures = ordered.map((r) => ({
    label: `${r.label} ${layout(r)}`,
    values: {
      p: r.p,
      callers: r.callers,
      handoffsPerS: r.handoffsPerS,
      sameIsolateNext: r.sameIsolateNext,
      requestsPerHandoff: r.requestsPerHandoff,
      calls: r.calls.length,
      callP50: median(r.calls),
      callP99: quantile(r.calls, 0.99),
      callMax: maxOf(r.calls),
      callMin: r.calls.length === 0 ? Number.NaN : r.calls.reduce((a, b) => Math.min(a, b)),
      cut: r.cut,
      errors: r.errors,
      lostUpdates: r.lostUpdates,
      overlaps: r.overlaps,
    },
  }));
}
