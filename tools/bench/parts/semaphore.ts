/**
 * Part: counting semaphores. edge-redlock's `Semaphore` (REST) against redis-semaphore's
 * `Semaphore` (one node) and `RedlockSemaphore` (every node), over ioredis TCP, on the same nodes
 * in one run. C callers, each its own client instance, loop acquire → hold → release on one
 * semaphore of k permits for a window; subjects and k take turns, round after round, and the
 * figures are medians over the rounds. Every claimed window goes into a history read on one
 * clock, and the overlap checker counts the most holders at once: never above k for a safe
 * design. Then the counterexample to counting per node (./semaphore-pairs.ts).
 */
import { loadavg } from "node:os";
import { type BenchContext, emptyPart, type PartResult } from "../context.js";
import type { NodeHost } from "../node-host-client.js";
import type { HostNode } from "../node-host-protocol.js";
import { fmt, median, quantile, rotate, sleep } from "../stats.js";
import { PermitHistory } from "./permit-history.js";
import { PAIRS_PERMITS, type PairsOutcome, runPairs } from "./semaphore-pairs.js";
import {
  createSemaphoreClient,
  type RequestCounter,
  SEMAPHORE_SUBJECTS,
  type SemaphoreClient,
  type SemaphoreSubjectId,
} from "./semaphore-subjects.js";

const N = 3;
const SUBJECTS: SemaphoreSubjectId[] = ["edge-redlock", "edge-redlock-10ms", "redis-semaphore", "redlock-semaphore"];
/** The counterexample makes one try per client: waiting settings do not apply there. */
const PAIRS_SUBJECTS: SemaphoreSubjectId[] = ["edge-redlock", "redis-semaphore", "redlock-semaphore"];
/** Contended: C callers for k = 3 and k = 2. Uncontended: as many callers as permits, so a permit is always free. */
function configs(callers: number): Config[] {
  return [
    { permits: 3, callers },
    { permits: 2, callers },
    { permits: 3, callers: 3 },
  ];
}
const HOLD_MS = 20;
const DELAY_MS = 20;
const PAIRS_LATE_MS = 300;
const PAIRS_HOLD_MS = PAIRS_LATE_MS + 300;

/** A load: k permits, C callers. */
interface Config {
  permits: number;
  callers: number;
}

/** One subject's figures in one window. */
export interface SemaphoreRun {
  id: SemaphoreSubjectId;
  permits: number;
  callers: number;
  /** Permits granted inside the window. */
  grants: number;
  permitsPerS: number;
  /** Requests the callers sent inside the window, per permit granted there. */
  requestsPerPermit: number;
  /** From the acquire call to the grant, per grant (ms). */
  waitP50: number;
  waitP99: number;
  /** acquire() calls that ended without a permit inside the window (the caller called again). */
  giveUps: number;
  /** The most claimed windows open at once. */
  mostAtOnce: number;
  /** Requests the clients counted over their whole life (warm-up and drain included). */
  clientRequests: number;
  /** The same, counted by the servers: HTTP requests at the bridges, commands at the TCP proxies. */
  serverRequests: number;
}

/** Requests the lock nodes received so far: HTTP requests at the bridges and commands at the TCP proxies. */
async function serverRequests(host: NodeHost): Promise<number> {
  const counts = await host.counts();
  return [...counts.http, ...counts.tcp].reduce((a, b) => a + b, 0);
}

/** `callers` clients of `id` loop acquire → hold → release on one semaphore for `windowMs`. */
async function runWindow(
  host: NodeHost,
  id: SemaphoreSubjectId,
  nodes: readonly HostNode[],
  permits: number,
  callers: number,
  windowMs: number,
  name: string,
): Promise<SemaphoreRun> {
  const counter: RequestCounter = { sent: 0 };
  // Windows run one at a time: between these two readings only this window's clients reach the nodes.
  const serverBefore = await serverRequests(host);
  const clients: SemaphoreClient[] = await Promise.all(
    Array.from({ length: callers }, () => createSemaphoreClient(id, nodes, counter)),
  );
  let closing: Promise<unknown> | undefined;
  const closeAll = () => {
    closing ??= Promise.all(clients.map((client) => client.close()));
    return closing;
  };
  try {
    // Warm-up, not counted: connections, script caches, edge-redlock's cluster check.
    await Promise.all(
      clients.map(async (client) => {
        const permit = await client.semaphore(`${name}:warm`, callers).acquire();
        await permit?.release();
      }),
    );
    const history = new PermitHistory();
    const waits: number[] = [];
    let grants = 0;
    let giveUps = 0;
    const start = performance.now();
    const end = start + windowMs;
    const base = counter.sent;
    let sent = 0;
    // At the end no caller starts another acquisition; those under way finish (an aborted one
    // would leave edge-redlock's cleanup sweeping its slot for a lease, into the next window).
    let over = false;
    const timer = setTimeout(() => {
      sent = counter.sent - base;
      over = true;
    }, windowMs);
    try {
      await Promise.all(
        clients.map(async (client, c) => {
          const source = client.semaphore(name, permits);
          while (!over) {
            const asked = performance.now();
            const permit = await source.acquire();
            if (permit === null) {
              if (performance.now() < end) giveUps++;
              continue;
            }
            const granted = performance.now();
            const close = history.claim(`caller ${c}`);
            if (granted < end) {
              grants++;
              waits.push(granted - asked);
            }
            await sleep(HOLD_MS);
            close();
            await permit.release();
          }
        }),
      );
    } finally {
      clearTimeout(timer);
    }
    const check = history.check(permits);
    await closeAll();
    return {
      id,
      permits,
      callers,
      grants,
      permitsPerS: grants / (windowMs / 1000),
      requestsPerPermit: grants > 0 ? sent / grants : Number.NaN,
      waitP50: quantile(waits, 0.5),
      waitP99: quantile(waits, 0.99),
      giveUps,
      mostAtOnce: check.mostAtOnce,
      clientRequests: counter.sent,
      serverRequests: (await serverRequests(host)) - serverBefore,
    };
  } finally {
    await closeAll();
  }
}

const label = (id: SemaphoreSubjectId) => SEMAPHORE_SUBJECTS[id].label;

/** The part: the loads of every subject, round after round, then the counterexample. */
export async function semaphorePart(ctx: BenchContext): Promise<PartResult> {
  const part = emptyPart("semaphore", "Counting semaphores");
  const { smoke } = ctx.options;
  const callers = smoke ? 6 : 12;
  const windowMs = smoke ? 1000 : ctx.options.durationS * 1000;
  const rounds = smoke ? 1 : Math.max(3, ctx.options.rounds);
  const trials = smoke ? 2 : 10;
  const nodes = ctx.host.nodes.slice(0, N);
  const tag = `${process.pid}:${Date.now().toString(36)}`;
  part.method.push(
    `N = ${N} nodes, +${DELAY_MS} ms per node on every round trip (REST bridges and TCP proxies alike). k = 3 and k = 2 permits with ${callers} callers (contended), and k = 3 with 3 callers (uncontended: a permit is always free, so this is the cost of a permit without waiting for one; edge-redlock may still try a slot another caller holds and probe for a free one). Each caller is its own client instance (its own Redlock, or its own ioredis connections), all in the benchmark's process: each loops acquire (lease 10 s) → hold ${HOLD_MS} ms → release on one semaphore for a ${windowMs / 1000} s window; after a give-up it calls acquire again.`,
    `Subjects: ${SUBJECTS.map((id) => `${label(id)} (${SEMAPHORE_SUBJECTS[id].transport}, ${SEMAPHORE_SUBJECTS[id].nodes(N)} node${SEMAPHORE_SUBJECTS[id].nodes(N) === 1 ? "" : "s"}; ${SEMAPHORE_SUBJECTS[id].waiting})`).join("; ")}.`,
    `${rounds} rounds; in each, every subject at each load runs one window, in an order that rotates from round to round. Figures are medians over the rounds; "most holders at once" is the largest over the rounds.`,
    "Permits/s: grants inside the window ÷ its length. Requests per permit: requests the callers sent inside the window ÷ its grants, counted on the client by its own transport (every fetch to a node for edge-redlock; every command ioredis writes for redis-semaphore), and checked against the servers' counts (HTTP requests at the bridges, commands at the TCP proxies) over each window's whole life, warm-up and drain included. Wait: from the acquire call to the grant, for the grants inside the window (a caller still waiting at its end is not in it). At the end no caller starts another acquisition; those under way finish, and the history covers them too. A warm-up acquisition per caller before each window is not counted.",
    "Most holders at once: the overlap checker, over a history of claimed windows (from the grant, as the caller learns it, to the moment it starts its release), all read on the benchmark process's one clock; a safe semaphore never has more than k.",
  );
  const runs: SemaphoreRun[] = [];
  const loads: string[] = [];
  const combos = configs(callers).flatMap((config) => SUBJECTS.map((id) => ({ id, ...config })));
  await ctx.host.setUniformDelay(DELAY_MS);
  try {
    for (let round = 0; round < rounds; round++) {
      loads.push(
        loadavg()
          .map((l) => l.toFixed(1))
          .join(", "),
      );
      for (const { id, permits, callers: c } of rotate(combos, round)) {
        ctx.log(`  semaphore: round ${round + 1}, ${label(id)}, k = ${permits}, C = ${c}`);
        runs.push(
          await runWindow(ctx.host, id, nodes, permits, c, windowMs, `sem:${tag}:${round}:${permits}:${c}:${id}`),
        );
      }
    }
  } finally {
    await ctx.host.setUniformDelay(0);
  }
  ctx.log(`  semaphore: the counterexample, ${trials} trials per subject`);
  const pairs = await runPairs(ctx.host.nodes, PAIRS_SUBJECTS, trials, PAIRS_LATE_MS, PAIRS_HOLD_MS, tag);
  report(part, runs, pairs, loads, { callers, windowMs, rounds, trials });
  return part;
}

function report(
  part: PartResult,
  runs: readonly SemaphoreRun[],
  pairs: readonly PairsOutcome[],
  loads: readonly string[],
  s: { callers: number; windowMs: number; rounds: number; trials: number },
): void {
  const rows: string[][] = [];
  part.figures = [];
  for (const { permits, callers } of configs(s.callers)) {
    for (const id of SUBJECTS) {
      const mine = runs.filter((r) => r.id === id && r.permits === permits && r.callers === callers);
      const values = {
        permits,
        callers,
        permitsPerS: median(mine.map((r) => r.permitsPerS)),
        grants: Math.min(...mine.map((r) => r.grants)),
        requestsPerPermit: median(mine.map((r) => r.requestsPerPermit)),
        waitP50: median(mine.map((r) => r.waitP50)),
        waitP99: median(mine.map((r) => r.waitP99)),
        giveUps: median(mine.map((r) => r.giveUps)),
        mostAtOnce: Math.max(...mine.map((r) => r.mostAtOnce)),
        clientRequests: mine.reduce((sum, r) => sum + r.clientRequests, 0),
        serverRequests: mine.reduce((sum, r) => sum + r.serverRequests, 0),
      };
      const load = callers === s.callers ? "" : `, C = ${callers}`;
      part.figures.push({ label: `${label(id)}, k = ${permits}${load}`, values });
      const info = SEMAPHORE_SUBJECTS[id];
      rows.push([
        String(permits),
        String(callers),
        info.label,
        `${info.transport}, ${info.nodes(N)}`,
        fmt(values.permitsPerS, 1),
        `${mine.map((r) => fmt(r.permitsPerS, 1)).join(" / ")}`,
        fmt(values.requestsPerPermit, 1),
        fmt(values.waitP50, 0),
        fmt(values.waitP99, 0),
        fmt(values.giveUps, 0),
        String(values.mostAtOnce),
      ]);
      part.violations.push({
        label: `semaphore, ${info.label}, k = ${permits}, C = ${callers}`,
        lostUpdates: 0,
        overlaps: Math.max(0, values.mostAtOnce - permits),
      });
    }
  }
  part.tables.push({
    title: `Semaphores under load (N = ${N}, +${DELAY_MS} ms per node, hold ${HOLD_MS} ms, ${s.windowMs / 1000} s windows, median of ${s.rounds} rounds)`,
    columns: [
      "k",
      "callers",
      "system",
      "transport, nodes",
      "permits/s",
      "permits/s per round",
      "requests/permit",
      "wait p50 (ms)",
      "wait p99 (ms)",
      "give-ups",
      "most holders at once",
    ],
    rows,
  });
  const counted = SUBJECTS.map((id) => {
    const mine = runs.filter((r) => r.id === id);
    return {
      id,
      client: mine.reduce((sum, r) => sum + r.clientRequests, 0),
      server: mine.reduce((sum, r) => sum + r.serverRequests, 0),
    };
  });
  part.tables.push({
    title: "Requests counted by the clients against the servers' counts (every window, warm-up and drain included)",
    columns: ["system", "counted by the clients", "counted by the servers", "difference"],
    rows: counted.map((c) => [label(c.id), String(c.client), String(c.server), String(c.server - c.client)]),
  });
  part.tables.push({
    title: `The counterexample: k = ${PAIRS_PERMITS}, N = ${N}, three clients that each reach a different pair of nodes first (the third node ${PAIRS_LATE_MS} ms late), one try each, ${s.trials} trials`,
    columns: ["system", "trials", "permits granted", "trials with more than k holders", "most holders at once"],
    rows: pairs.map((p) => [
      label(p.id),
      String(p.trials),
      `${p.grants} (${fmt(p.grants / Math.max(1, p.trials), 1)} per trial)`,
      String(p.excessTrials),
      String(p.mostAtOnce),
    ]),
  });
  part.tables.push({
    title: "Load average (1, 5, 15 min) at the start of each round",
    columns: ["round", "load average"],
    rows: loads.map((load, i) => [String(i + 1), load]),
  });
  for (const p of pairs) {
    part.figures.push({
      label: `counterexample, ${label(p.id)}`,
      values: { trials: p.trials, grants: p.grants, excessTrials: p.excessTrials, mostAtOnce: p.mostAtOnce },
    });
    part.violations.push({
      label: `semaphore counterexample, ${label(p.id)}`,
      lostUpdates: 0,
      overlaps: Math.max(0, p.mostAtOnce - PAIRS_PERMITS),
    });
  }
  const edge = part.figures.filter((f) => f.label.includes(SEMAPHORE_SUBJECTS["edge-redlock"].label));
  const worst = Math.max(...edge.map((f) => (f.values.mostAtOnce ?? 0) - (f.values.permits ?? PAIRS_PERMITS)));
  part.checks.push({
    target: "edge-redlock Semaphore: never more holders at once than permits (under load and in the counterexample)",
    measured: worst <= 0 ? "never above k" : `${worst} above k`,
    pass: worst <= 0,
  });
  part.method.push(
    `The counterexample: client c reaches nodes c and c + 1 at once and node c + 2 ${PAIRS_LATE_MS} ms late (REST: a \`fetch\` that holds those requests back; TCP: a proxy of the client's own in front of each node, the one before that node holding back every chunk the client sends). No added delay otherwise. The three clients try once at the same moment on a fresh semaphore (edge-redlock: \`tryAcquire()\`; redis-semaphore: \`acquireAttemptsLimit: 1\`); each one granted holds ${PAIRS_HOLD_MS} ms, so the grants of a trial overlap. Subjects take turns trial by trial.`,
  );
  part.notes.push(
    `Counting holders per node admits where the count is below k on a majority: each holder needs ${Math.floor(N / 2) + 1} of ${N} nodes and each node admits k, so up to ⌊N·k/q⌋ = ${Math.floor((N * PAIRS_PERMITS) / (Math.floor(N / 2) + 1))} holders of a ${PAIRS_PERMITS}-permit semaphore at once. edge-redlock's permits are k slots, each a mutex: any two quorums for one slot share a node, whose SET NX let only one in.`,
  );
}
