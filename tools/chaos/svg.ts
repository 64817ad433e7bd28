/**
 * An SVG timeline of one scenario, written by hand (no dependency), that opens in a browser: one
 * lane per client with its claimed hold windows (colour per resource), fault windows shaded with
 * their names, and anomalies marked in red (overlaps as red bands on both lanes, over-claims as a
 * red bar from the quorum's real expiry to the claimed deadline, foreign touches and lost updates
 * as red marks).
 * @module
 */
import { grantsOf } from "./checkers/grants.js";
import type { ScenarioResult } from "./harness.js";
import type { FaultEvent, FaultSpec } from "./history.js";

const WIDTH = 1200;
const LEFT = 90;
const RIGHT = 20;
const LANE = 34;
const TOP = 84;
const COLOURS = ["#4c78a8", "#59a14f", "#b07aa1", "#9c755f", "#76b7b2", "#edc948"];

/** Renders the timeline. */
export function timelineSvg(result: ScenarioResult): string {
  const { history, checks, scenario } = result;
  const grants = grantsOf(history);
  const processes = [
    ...new Set(
      grants.map((g) => g.process).concat(history.filter((e) => /^c[\d.]+$/.test(e.process)).map((e) => e.process)),
    ),
  ].sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
  // Start at the workload (the first lock operation or fault), not at node start-up.
  const active = history.filter((e) => /^c[\d.]+$/.test(e.process) || e.process === "nemesis").map((e) => e.t);
  const times = history.filter((e) => e.f !== "run-start" && e.f !== "clock-offset").map((e) => e.t);
  const t0 = Math.min(...(active.length > 0 ? active : times)) - 50;
  const t1 = Math.max(...times.filter((t) => t >= t0), t0 + 1);
  const x = (t: number) => LEFT + ((Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0)) * (WIDTH - LEFT - RIGHT);
  const laneOf = new Map(processes.map((p, i) => [p, i]));
  const laneY = (p: string) => TOP + (laneOf.get(p) ?? 0) * LANE;

  // Fault windows.
  const faults: { spec: FaultSpec; start: number; end: number }[] = [];
  const open = new Map<number, { spec: FaultSpec; start: number }>();
  for (const e of history) {
    if (e.f === "fault-start") open.set((e as FaultEvent).fault.id, { spec: (e as FaultEvent).fault, start: e.t });
    if (e.f === "fault-end") {
      const o = open.get((e as FaultEvent).fault.id);
      if (o) faults.push({ ...o, end: e.t });
      open.delete((e as FaultEvent).fault.id);
    }
  }
  for (const o of open.values()) faults.push({ ...o, end: t1 });

  const height = TOP + Math.max(1, processes.length) * LANE + 60;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="18" font-size="14" font-weight="bold">${esc(scenario.name)} (${scenario.kind}, q=${scenario.quorum}/N=${scenario.nodes}, TTL ${scenario.ttlMs} ms, seed ${result.seed})</text>`,
    `<text x="10" y="34">${esc(scenario.description)}</text>`,
    `<text x="10" y="50" fill="${!result.verdict.pass ? "#c00" : scenario.kind === "finding" ? "#b5651d" : "#2a7"}">C1 ${result.anomalies.overlap} · C2 ${result.anomalies.overClaim} · C3 ${result.anomalies.foreignTouch} · C4 unfenced ${result.anomalies.lostUnfenced} / fenced ${result.anomalies.lostFenced ?? "n/a"} · C6 ${result.anomalies.overPermits} · C7 ${result.anomalies.readWrite} — ${result.verdict.pass ? { safe: "clean", control: "control fired", finding: "open finding reproduced" }[scenario.kind] : esc(result.verdict.reasons.join("; "))}</text>`,
  );
  faults.forEach((f, i) => {
    const fx = x(f.start);
    const w = Math.max(2, x(f.end) - fx);
    const target = f.spec.clients?.length ? f.spec.clients.join(",") : f.spec.nodes ? `n${f.spec.nodes.join(",")}` : "";
    parts.push(
      `<rect x="${fx}" y="${TOP - 4}" width="${w}" height="${processes.length * LANE + 4}" fill="#f4a261" fill-opacity="0.18"><title>${esc(`${f.spec.kind} ${target} ${JSON.stringify(f.spec.params ?? {})}`)}</title></rect>`,
      `<text x="${fx + 1}" y="${TOP - 8 - (i % 2) * 11}" fill="#b5651d" font-size="9">${esc(`${f.spec.kind} ${target}`)}</text>`,
    );
  });
  processes.forEach((p) => {
    parts.push(
      `<text x="10" y="${laneY(p) + 18}">${esc(p)}</text>`,
      `<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${laneY(p) + LANE - 2}" y2="${laneY(p) + LANE - 2}" stroke="#eee"/>`,
    );
  });
  const resources = [...new Set(grants.map((g) => g.resource))];
  for (const g of grants) {
    const colour = COLOURS[resources.indexOf(g.resource) % COLOURS.length];
    for (const w of g.windows) {
      parts.push(
        `<rect x="${x(w.start)}" y="${laneY(g.process) + 6}" width="${Math.max(1, x(w.end) - x(w.start))}" height="${LANE - 14}" fill="${colour}" fill-opacity="0.8"><title>${esc(`${g.resource} lock ${g.lock}`)}</title></rect>`,
      );
    }
  }
  for (const o of checks.overlap.anomalies) {
    for (const p of [o.first.process, o.second.process]) {
      parts.push(
        `<rect x="${x(o.start)}" y="${laneY(p) + 2}" width="${Math.max(2, x(o.end) - x(o.start))}" height="${LANE - 6}" fill="none" stroke="#d00" stroke-width="2"><title>${esc(`C1 overlap on ${o.resource}: ${Math.round(o.end - o.start)} ms`)}</title></rect>`,
      );
    }
  }
  for (const c of checks.claims.anomalies) {
    const from = Number.isFinite(c.quorumExpiryUpperBound) ? c.quorumExpiryUpperBound : c.t;
    parts.push(
      `<rect x="${x(from)}" y="${laneY(c.process) + LANE - 10}" width="${Math.max(2, x(c.claimedDeadline) - x(from))}" height="5" fill="#d00"><title>${esc(`C2 over-claim after ${c.after}: ${Number.isFinite(c.overClaimMs) ? `${Math.round(c.overClaimMs)} ms` : "no quorum holds the key"}`)}</title></rect>`,
    );
  }
  for (const b of checks.backing.anomalies) {
    parts.push(
      `<path d="M ${x(b.t)} ${laneY(b.process) + 4} l -5 -7 h 10 z" fill="#d00"><title>${esc(`C2 (log): at the end of this claim only nodes ${b.holders.join(",") || "none"} may still hold the key`)}</title></path>`,
    );
  }
  for (const f of checks.foreignTouch.anomalies) {
    parts.push(
      `<text x="${x(f.t) - 4}" y="${TOP + processes.length * LANE + 18}" fill="#d00" font-size="14">✖<title>${esc(`C3: ${f.script} ${f.cmd} on node ${f.node} touched ${f.key} holding another token`)}</title></text>`,
    );
  }
  for (const u of checks.counter.unfenced.anomalies) {
    parts.push(
      `<circle cx="${x(u.t)}" cy="${laneY(u.process) + LANE / 2}" r="5" fill="#d00"><title>${esc(`C4 lost update on ${u.resource}: read ${u.read}, replaced ${u.prev}`)}</title></circle>`,
    );
  }
  const seconds = (t1 - t0) / 1000;
  // At most about 15 ticks.
  const step = [0.5, 1, 2, 5, 10, 30, 60, 120].find((candidate) => seconds / candidate <= 15) ?? 300;
  for (let s = 0; s <= seconds; s += step) {
    const tx = x(t0 + s * 1000);
    parts.push(
      `<line x1="${tx}" x2="${tx}" y1="${height - 40}" y2="${height - 34}" stroke="#999"/>`,
      `<text x="${tx}" y="${height - 24}" text-anchor="middle" fill="#666">${s.toFixed(step < 1 ? 1 : 0)} s</text>`,
    );
  }
  parts.push(
    `<text x="10" y="${height - 6}" fill="#666">bars: claimed hold windows (colour = resource) · shaded: faults · red outline: C1 overlap · red bar / ▼: C2 over-claim (audit / nodes' log) · ✖: C3 · red dot: C4 lost update</text>`,
    "</svg>",
  );
  return parts.join("\n");
}

function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
