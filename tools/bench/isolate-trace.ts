/**
 * Where a handoff's time goes across isolates: a trace of the isolates parts' client processes,
 * and its analysis.
 *
 * With `ISOLATE_TRACE=<dir>` in the environment of `npm run bench -- --parts isolates …`, every
 * client process writes `<dir>/<system>-<policy>-<pid>.log` when it exits: one line per event,
 * `<epoch ms> <who> <event> [node port] [command] [script] [answer]`, where `who` is the process id
 * and, for an event of a caller's call, the caller's index in its isolate (`<pid>.<caller>`: the
 * callers of one isolate share its `fetch`, and a trace by process mixes their polls), and the event is `send` or
 * `recv` (a request to a lock node through the process's `fetch`: `send` when `fetch` is called,
 * before the simulated latency holds the request back half a round trip, so it reaches the node
 * that much later; `recv` when the answer is handed back, after the other half; for a library
 * script its name, the gate's with its mode, and on `recv` the gate's answer, see
 * {@link describeReply}), `granted` (acquire() returned a lock),
 * `gave-up` (acquire() gave up) or `release` (release() called). TCP peers' commands go through
 * ioredis, not `fetch`: their traces hold grants, give-ups and releases only.
 *
 * `npx tsx tools/bench/isolate-trace.ts <dir> [quorum]` prints, per system: the time from one holder's
 * release() to the next grant (the handoff's cost beyond the critical section), how many of those
 * handoffs the next holder won with one take (a `SET` fan-out) and how many needed more, how many
 * it won with a take aimed at the release and how many with one sent after a poll took the gate,
 * when the single take left relative to the release, how long a take took to its quorum-th answer
 * (`quorum`: 3 for the parts' N = 5), how many handoffs waited for a placeholder on the gate to run
 * out, and the critical section's own spread; and from the gate's answers, how far its predictions
 * were from the releases, where the aimed takes landed against them, and what the aims cost as
 * they went and with the one margin that would have cost least (see {@link PredictionFigures}).
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { scriptBySha } from "../../src/testing/scripts.js";
import { gateScript } from "../../src/waiting/scripts/gate.js";

/** One traced event. */
export interface TraceEvent {
  /** Epoch milliseconds (performance.timeOrigin + performance.now(): comparable across processes). */
  readonly at: number;
  /** Who: `<pid>`, or `<pid>.<caller>` for an event of a caller's call (the analysis's unit). */
  readonly pid: string;
  readonly event: "send" | "recv" | "granted" | "release" | "gave-up";
  /** For send and recv: the node's port and the command's name (`SET`, `EVALSHA`, …). */
  readonly node?: string;
  readonly command?: string;
  /** For EVALSHA of a library script: its name, and for the gate's script its mode (`gate:take`). */
  readonly script?: string;
  /** For recv of the gate's script: its answer's first figures, `taken,rank,pttl,freeIn` (see {@link describeReply}). */
  readonly reply?: string;
}

/** A recorder for this process, or `undefined` when tracing is off. */
export function traceRecorder(
  dir: string | undefined,
  label: string,
): { record(event: TraceEvent["event"], detail?: string, caller?: number): void } | undefined {
  if (!dir) return undefined;
  // The trace is written at exit: the folder is made now, while a failure can still be seen.
  mkdirSync(dir, { recursive: true });
  const lines: string[] = [];
  process.on("exit", () => {
    const file = join(dir, `${label}-${process.pid}.log`);
    try {
      writeFileSync(file, lines.join("\n"));
    } catch (error) {
      console.error(`isolate trace: could not write ${file}: ${(error as Error).message}`);
    }
  });
  return {
    record(event, detail, caller) {
      const at = (performance.timeOrigin + performance.now()).toFixed(2);
      const who = caller === undefined ? `${process.pid}` : `${process.pid}.${caller}`;
      lines.push(detail === undefined ? `${at} ${who} ${event}` : `${at} ${who} ${event} ${detail}`);
    },
  };
}

/**
 * A request's node port and command name, for the trace, and for a library script its name (the
 * gate's with its mode): never keys, tokens or other arguments.
 */
export function describeRequest(url: string, body: unknown): string {
  let command = "?";
  let script = "";
  try {
    const parsed = JSON.parse(String(body)) as unknown;
    if (Array.isArray(parsed) && typeof parsed[0] === "string") {
      command = parsed[0].toUpperCase();
      const known = command === "EVALSHA" && typeof parsed[1] === "string" ? scriptBySha(parsed[1]) : undefined;
      if (known === gateScript) script = ` gate:${String(parsed[4 + Number(parsed[2])])}`;
      else if (known !== undefined) script = ` ${known.name}`;
    } else if (Array.isArray(parsed) && Array.isArray(parsed[0])) command = "PIPELINE";
  } catch {
    // Not JSON: "?"
  }
  return `${new URL(url).port} ${command}${script}`;
}

/**
 * For an answer of the gate's script (`described` as {@link describeRequest} put it), its first
 * figures, `taken,rank,pttl,freeIn` (after a take, the 4th is how long ago the last release went
 * through the gate, -1 when the keys were free without one); nothing for any other answer.
 */
export function describeReply(described: string, text: string): string | undefined {
  if (!described.includes(" gate:")) return undefined;
  try {
    const { result } = JSON.parse(text) as { result?: unknown };
    if (Array.isArray(result) && result.length >= 4 && result.slice(0, 4).every(Number.isInteger))
      return result.slice(0, 4).join(",");
  } catch {
    // Not the gate's answer (an error, a body of another shape).
  }
  return undefined;
}

/** Parses one trace file's text. */
export function parseTrace(text: string): TraceEvent[] {
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [at, pid, event, node, command, script, reply] = line.split(" ");
      return { at: Number(at), pid: pid as string, event: event as TraceEvent["event"], node, command, script, reply };
    });
}

/** The figures of one system's trace (milliseconds). */
export interface TraceFigures {
  handoffs: number;
  /** release() of one holder → the next grant. */
  gap: Quantiles;
  /** Handoffs the next holder won with one take, and with more than one. */
  oneTake: number;
  moreTakes: number;
  /**
   * Handoffs by their winning take: aimed at the release (the gate asked with the other nodes), the
   * nodes asked again after an aimed take of the same handoff (those that said "held" while the
   * gate was taken), or a take that followed a poll that took the gate.
   */
  aimed: { count: number; gap: Quantiles };
  askedAgain: { count: number; gap: Quantiles };
  afterPoll: { count: number; gap: Quantiles };
  /**
   * Handoffs whose next holder's last take of the gate found it free with no release through the
   * gate since the take before (a placeholder ran out, or a lock): the line waited for a key
   * nobody held. Only from traces that carry the gate's answers.
   */
  unreleased: { count: number; gap: Quantiles };
  /** Of the one-take handoffs: when the take left, from the release() call (negative: before it). */
  takeOffset: Quantiles;
  /** A take's first request → its quorum-th answer. */
  takeToQuorum: Quantiles;
  /** granted → release() of the same holder. */
  section: Quantiles & { sd: number };
}

export interface Quantiles {
  p10: number;
  p50: number;
  p90: number;
  mean: number;
}

function quantiles(values: readonly number[]): Quantiles {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.floor(p * (sorted.length - 1))] ?? Number.NaN;
  const mean = sorted.length === 0 ? Number.NaN : sorted.reduce((a, b) => a + b, 0) / sorted.length;
  return { p10: at(0.1), p50: at(0.5), p90: at(0.9), mean };
}

/**
 * A take sends each node one `SET`, all at once or spread so that they land together (a node
 * farther away first): a `SET` to a node the take already asked, or this long after its first,
 * starts another take.
 */
const TAKE_SPREAD_MS = 200;
/** A gate script sent this close to a take's requests was its gate part (an aimed take). */
const WITH_TAKE_MS = 3;
/** Handoffs further apart than this are not one handoff (the window's end, a give-up). */
const MAX_GAP_MS = 1000;
/** A take sent up to this long before the release still belongs to its handoff (it landed early). */
const EARLY_MS = 40;

/**
 * Analyses the events of one system's processes (one or more runs of it: runs never overlap in
 * time). A grant belongs to the release before it, whoever released. The takes that won it are the
 * next holder's `SET` fan-outs from {@link EARLY_MS} before that release to the grant. The last of
 * them won: aimed at the release when the gate's script left with its SETs (the gate is asked in
 * the same round trip, and counts among the quorum's answers), or sent after a poll that took the
 * gate (the gate is already ours: one answer fewer makes the quorum).
 */
export function analyseTrace(events: readonly TraceEvent[], quorum: number): TraceFigures {
  const sorted = [...events].sort((a, b) => a.at - b.at);
  const byPid = new Map<string, TraceEvent[]>();
  for (const e of sorted) {
    const list = byPid.get(e.pid);
    if (list) list.push(e);
    else byPid.set(e.pid, [e]);
  }
  const gaps: number[] = [];
  const gapsBy = {
    aimed: [] as number[],
    askedAgain: [] as number[],
    afterPoll: [] as number[],
    unreleased: [] as number[],
  };
  const offsets: number[] = [];
  const toQuorum: number[] = [];
  const sections: number[] = [];
  let oneTake = 0;
  let moreTakes = 0;
  let lastRelease: TraceEvent | undefined;
  const grantedAt = new Map<string, number>();
  for (const e of sorted) {
    if (e.event === "release") {
      const since = grantedAt.get(e.pid);
      if (since !== undefined) sections.push(e.at - since);
      grantedAt.delete(e.pid);
      lastRelease = e;
      continue;
    }
    if (e.event !== "granted") continue;
    grantedAt.set(e.pid, e.at);
    const release = lastRelease;
    lastRelease = undefined;
    if (release === undefined || e.at - release.at > MAX_GAP_MS) continue;
    const gap = e.at - release.at;
    gaps.push(gap);
    const mine = (byPid.get(e.pid) ?? []).filter((x) => x.at >= release.at - EARLY_MS && x.at < e.at);
    const gateTake = (byPid.get(e.pid) ?? [])
      .filter((x) => x.event === "recv" && x.at < e.at && x.reply?.startsWith("1,"))
      .at(-1);
    if (gateTake !== undefined && gateTake.at >= release.at - MAX_GAP_MS && gateTake.reply?.split(",")[3] === "-1")
      gapsBy.unreleased.push(gap);
    const sends = mine.filter((x) => x.event === "send");
    const takes: { first: number; last: number; nodes: Set<string | undefined> }[] = [];
    for (const send of sends.filter((x) => x.command === "SET")) {
      const take = takes.at(-1);
      if (take === undefined || take.nodes.has(send.node) || send.at - take.first > TAKE_SPREAD_MS) {
        takes.push({ first: send.at, last: send.at, nodes: new Set([send.node]) });
      } else {
        take.nodes.add(send.node);
        take.last = send.at;
      }
    }
    const last = takes.at(-1);
    if (last === undefined) continue;
    const won = last.first;
    const withGate = takes.map((take) =>
      sends.some(
        (x) => x.command === "EVALSHA" && x.at >= take.first - WITH_TAKE_MS && x.at <= take.last + WITH_TAKE_MS,
      ),
    );
    const aimed = withGate.at(-1) === true;
    (aimed ? gapsBy.aimed : withGate.includes(true) ? gapsBy.askedAgain : gapsBy.afterPoll).push(gap);
    if (takes.length > 1) {
      moreTakes++;
      continue;
    }
    oneTake++;
    offsets.push(won - release.at);
    const answers = mine.filter((x) => x.event === "recv" && x.at >= won);
    const quorumth = answers[aimed ? quorum - 1 : quorum - 2]?.at;
    if (quorumth !== undefined) toQuorum.push(quorumth - won);
  }
  const section = quantiles(sections);
  const sd = Math.sqrt(sections.reduce((a, b) => a + (b - section.mean) ** 2, 0) / Math.max(1, sections.length));
  return {
    handoffs: gaps.length,
    gap: quantiles(gaps),
    oneTake,
    moreTakes,
    aimed: { count: gapsBy.aimed.length, gap: quantiles(gapsBy.aimed) },
    askedAgain: { count: gapsBy.askedAgain.length, gap: quantiles(gapsBy.askedAgain) },
    afterPoll: { count: gapsBy.afterPoll.length, gap: quantiles(gapsBy.afterPoll) },
    unreleased: { count: gapsBy.unreleased.length, gap: quantiles(gapsBy.unreleased) },
    takeOffset: quantiles(offsets),
    takeToQuorum: quantiles(toQuorum),
    section: { ...section, sd },
  };
}

/** How far the gate's predictions were from the releases, and what became of the aimed takes. */
export interface PredictionFigures {
  /**
   * Release landing on the gate less the landing the poll before an aimed take predicted, in ms
   * (positive: the release came later), for holders whose isolate had held twice or more before,
   * and for an isolate's first two holds (predicted by the line's average).
   */
  established: Quantiles & { count: number };
  firstHolds: Quantiles & { count: number };
  /** Aimed takes answered, those that took the gate, and of the others: before the holder's release, or after another take. */
  aims: { answered: number; taken: number; early: number; afterAnotherTake: number };
  /**
   * Where the aimed takes landed against the releases they went for (release landing on the gate
   * less the aim's landing: positive, the aim came early), and what that cost: an aim that came
   * early is sent again at once, a round trip (its own) later, until one lands after the release;
   * the cost of an aim is how long after the release that one landed. `asAimed` as the aims went;
   * `bestShift` with every aim moved by the one shift (ms, positive: later) that costs least, the
   * nearest to 0 among equals: what a better margin could save with the same predictions. The
   * shift is looked for within half the aims' median round trip of the one that lands the median
   * aim on its release: further, it only trades aims for the ones sent again a round trip after
   * them, at the price of a take's requests, which this cost leaves out.
   */
  aimCost: {
    count: number;
    offset: Quantiles;
    asAimed: { meanMs: number; early: number };
    bestShift: { shiftMs: number; meanMs: number; early: number };
  };
}

/** The mean cost of aims that landed `offset` before their release, each moved later by `shift` (see `aimCost`). */
function aimCostAt(aims: readonly { offset: number; rtt: number }[], shift: number): { meanMs: number; early: number } {
  let sum = 0;
  let early = 0;
  for (const { offset, rtt } of aims) {
    const before = offset - shift;
    if (before <= 0) sum -= before;
    else {
      early++;
      sum += Math.ceil(before / rtt) * rtt - before;
    }
  }
  return { meanMs: aims.length === 0 ? Number.NaN : sum / aims.length, early };
}

/** A key set again since an answer reads this much more PTTL than the time between the two answers leaves. */
const RESET_PTTL_MS = 60;

/**
 * The gate's predictions against the releases, from a trace that carries the gate's answers. A
 * request lands half its round trip after its send. A prediction is a poll's answer from the first
 * in line with the lock held and `freeIn` ahead, followed by an aimed take: it lands `freeIn` after
 * the poll did. The release it predicts is the next release through the gate from the process of
 * the last taker before that poll. Not for traces of systems other than edge-redlock.
 */
export function analysePredictions(events: readonly TraceEvent[]): PredictionFigures {
  type Request = { pid: string; node?: string; script?: string; at: number; land: number; rtt: number; reply?: string };
  const open = new Map<string, { at: number; event: TraceEvent }[]>();
  const answered: Request[] = [];
  for (const e of [...events].sort((a, b) => a.at - b.at)) {
    if (e.event !== "send" && e.event !== "recv") continue;
    const key = `${e.pid} ${e.node} ${e.script ?? e.command}`;
    if (e.event === "send") {
      const queue = open.get(key);
      if (queue) queue.push({ at: e.at, event: e });
      else open.set(key, [{ at: e.at, event: e }]);
      continue;
    }
    const sent = open.get(key)?.shift();
    if (sent !== undefined)
      answered.push({
        pid: e.pid,
        node: e.node,
        script: e.script,
        at: sent.at,
        land: (sent.at + e.at) / 2,
        rtt: e.at - sent.at,
        reply: e.reply,
      });
  }
  answered.sort((a, b) => a.land - b.land);
  const processOf = (pid: string) => pid.split(".")[0];
  const takes = answered.filter((r) => r.script?.startsWith("gate:") && r.reply?.startsWith("1,"));
  const releases = answered.filter((r) => r.script === "gate-release");
  const figures = (r: Request) => (r.reply ?? "").split(",").map(Number);
  const established: number[] = [];
  const firstHolds: number[] = [];
  const landed: { offset: number; rtt: number }[] = [];
  const aimedAt = new Set<string>();
  const aims = { answered: 0, taken: 0, early: 0, afterAnotherTake: 0 };
  const byPid = new Map<string, Request[]>();
  for (const r of answered) {
    if (!r.script?.startsWith("gate:") || r.script === "gate:leave" || r.reply === undefined) continue;
    const list = byPid.get(r.pid);
    if (list) list.push(r);
    else byPid.set(r.pid, [r]);
  }
  for (const list of byPid.values()) {
    for (let i = 1; i < list.length; i++) {
      const aim = list[i] as Request;
      if (aim.script !== "gate:aim") continue;
      const poll = list[i - 1] as Request;
      const [taken, , pttl] = figures(aim);
      const [, rank, pollPttl = -2, freeIn = 0] = figures(poll);
      aims.answered++;
      const went = takes
        .filter((t) => t.node === aim.node && t.land < aim.land && processOf(t.pid) !== processOf(aim.pid))
        .at(-1);
      // The holder's release through the gate, if it came before the gate's next take (a hold that
      // ended otherwise, a placeholder that ran out, has none).
      const nextTake = went ? takes.find((t) => t.node === aim.node && t.land > went.land) : undefined;
      const releasedBy = went
        ? releases.find(
            (r) =>
              r.node === aim.node &&
              processOf(r.pid) === processOf(went.pid) &&
              r.land > went.land &&
              (nextTake === undefined || r.land <= nextTake.land),
          )
        : undefined;
      // An aim sent again after it came early went for the same release: its cost is the first's.
      const aimKey = releasedBy && `${aim.pid} ${releasedBy.land}`;
      if (releasedBy && aimKey && !aimedAt.has(aimKey) && aim.rtt > 0) {
        aimedAt.add(aimKey);
        landed.push({ offset: releasedBy.land - aim.land, rtt: aim.rtt });
      }
      if (taken === 1) aims.taken++;
      else if (pttl !== -2 && pollPttl !== -2 && (pttl as number) > pollPttl - (aim.land - poll.land) + RESET_PTTL_MS)
        aims.afterAnotherTake++;
      else aims.early++;
      if (rank !== 0 || pollPttl === -2 || freeIn <= 0) continue;
      const holder = takes.filter((t) => t.node === poll.node && t.land <= poll.land).at(-1);
      if (holder === undefined) continue;
      const release = releases.find(
        (r) => r.node === poll.node && processOf(r.pid) === processOf(holder.pid) && r.land > holder.land,
      );
      if (release === undefined) continue;
      const earlier = takes.filter((t) => processOf(t.pid) === processOf(holder.pid) && t.land < holder.land).length;
      (earlier < 2 ? firstHolds : established).push(release.land - (poll.land + freeIn));
    }
  }
  let bestShift = { shiftMs: 0, ...aimCostAt(landed, 0) };
  const centre = quantiles(landed.map((a) => a.offset)).p50;
  const reach = quantiles(landed.map((a) => a.rtt)).p50 / 2;
  const shifts: number[] = [];
  for (let half = Math.ceil(2 * (centre - reach)); half <= 2 * (centre + reach); half++) shifts.push(half / 2);
  for (const shiftMs of shifts.sort((a, b) => Math.abs(a) - Math.abs(b))) {
    const cost = aimCostAt(landed, shiftMs);
    if (cost.meanMs < bestShift.meanMs) bestShift = { shiftMs, ...cost };
  }
  return {
    established: { ...quantiles(established), count: established.length },
    firstHolds: { ...quantiles(firstHolds), count: firstHolds.length },
    aims,
    aimCost: {
      count: landed.length,
      offset: quantiles(landed.map((a) => a.offset)),
      asAimed: aimCostAt(landed, 0),
      bestShift,
    },
  };
}

function show(q: Quantiles): string {
  return `${q.p10.toFixed(1)} / ${q.p50.toFixed(1)} / ${q.p90.toFixed(1)} (mean ${q.mean.toFixed(1)})`;
}

// Run as a script (not when bundled into the client processes, whose entry is another file).
if (process.argv[1]?.endsWith("isolate-trace.ts") && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [dir, quorumArg = "3"] = process.argv.slice(2);
  const quorum = Number(quorumArg);
  if (!dir || !Number.isInteger(quorum) || quorum < 1) {
    console.error(
      "usage: npx tsx tools/bench/isolate-trace.ts <dir written by ISOLATE_TRACE=<dir> npm run bench …> [quorum, 3 for the parts' N = 5]",
    );
    process.exit(2);
  }
  const bySystem = new Map<string, TraceEvent[]>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".log"))) {
    const system = file.replace(/-\d+\.log$/, "");
    bySystem.set(system, [...(bySystem.get(system) ?? []), ...parseTrace(readFileSync(join(dir, file), "utf8"))]);
  }
  for (const [system, events] of bySystem) {
    const f = analyseTrace(events, quorum);
    console.log(`${system}: ${f.handoffs} handoffs`);
    console.log(`  release() → next grant, p10 / p50 / p90 ms: ${show(f.gap)}`);
    if (f.oneTake + f.moreTakes > 0) {
      console.log(`  won with one take: ${f.oneTake}; with more: ${f.moreTakes}`);
      console.log(`  won by a take aimed at the release: ${f.aimed.count}, release() → grant ${show(f.aimed.gap)}`);
      console.log(
        `  won by nodes asked again after an aimed take: ${f.askedAgain.count}, release() → grant ${show(f.askedAgain.gap)}`,
      );
      console.log(`  won after a poll took the gate: ${f.afterPoll.count}, release() → grant ${show(f.afterPoll.gap)}`);
      if (f.unreleased.count > 0)
        console.log(
          `  of all: the gate taken free with no release since the take before (a placeholder ran out): ${f.unreleased.count}, release() → grant ${show(f.unreleased.gap)}`,
        );
      console.log(`  the one take left, from release(): ${show(f.takeOffset)}`);
      console.log(`  a take to its quorum-th answer: ${show(f.takeToQuorum)}`);
    }
    console.log(`  critical section: ${show(f.section)}, sd ${f.section.sd.toFixed(1)}`);
    const p = analysePredictions(events);
    if (p.aims.answered > 0) {
      console.log(
        `  aimed takes: ${p.aims.answered}, took the gate ${p.aims.taken}, before the holder's release ${p.aims.early}, after another take ${p.aims.afterAnotherTake}`,
      );
      console.log(
        `  release less its prediction, holders whose isolate held twice or more before (${p.established.count}): ${show(p.established)}`,
      );
      console.log(
        `  release less its prediction, an isolate's first two holds (${p.firstHolds.count}): ${show(p.firstHolds)}`,
      );
      const c = p.aimCost;
      console.log(`  release less the aim's landing (${c.count}, positive: the aim came early): ${show(c.offset)}`);
      console.log(
        `  an aim's cost, landing after the release (sent again a round trip later while early): as aimed ${c.asAimed.meanMs.toFixed(1)} ms, ${c.asAimed.early} early; every aim ${c.bestShift.shiftMs} ms later, the least: ${c.bestShift.meanMs.toFixed(1)} ms, ${c.bestShift.early} early`,
      );
    }
  }
}
