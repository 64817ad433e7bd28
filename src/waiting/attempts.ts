/**
 * One attempt of a waiter: a fan-out to every node (plain, with the gate's part played by a poll,
 * or started by a release that handed the lock over), counted and reported, and what its answers
 * tell about the gate.
 * @module
 */

import type { NodeOutcome, NodeOutcomeKind } from "../base/report.js";
import { attemptCost, checkBudget } from "../core/backoff-waiting.js";
import {
  type AttemptResult,
  attemptAcquire,
  attemptOnce,
  type GateRole,
  type TakenGate,
} from "../core/operations/acquire.js";
import { isFailure } from "../core/quorum.js";
import type { HotResources } from "../isolate/hot-resources.js";
import { leave } from "./gate-client.js";
import { checkAbort } from "./limits.js";
import { distanceRtt } from "./pacing.js";
import { nextEntryId, type Waiter } from "./state.js";

/**
 * One attempt (a fan-out to every node), counted and checked against the caller's signal.
 * `gate`: how the gate node takes part, when by a poll; `handedOver`: the attempt a release already
 * started for us (see `offers.ts`); `taken`: the gate a poll took for a fenced attempt.
 */
export async function fanOut(
  w: Waiter,
  gate?: GateRole,
  handedOver?: Promise<AttemptResult>,
  taken?: TakenGate,
): Promise<AttemptResult> {
  const s = w.state;
  checkAbort(w);
  // A release that handed the lock over sent the requests itself; a gate that a poll took before
  // the attempt is asked nothing more (its part only reads the poll's answer): one request fewer,
  // which is the whole margin of a call near the end of its budget.
  if (handedOver === undefined) {
    const nodeCount = w.engine.nodes.length;
    const gateTaken = gate?.startedAt !== undefined ? 1 : 0;
    checkBudget(w.request, w.reports, w.requestsSent(), attemptCost(w.request, nodeCount) - gateTaken, nodeCount);
  }
  s.attempts++;
  const racing = gate === undefined && handedOver === undefined && taken === undefined ? race(w) : undefined;
  const result = handedOver
    ? await handedOver
    : gate
      ? await attemptAcquire(w.engine, w.request, s.attempts, w.signal, w.operations, gate, s.polls)
      : await attemptOnce(w.engine, w.request, s.attempts, w.signal, w.operations, s.polls, taken);
  s.polls = 0;
  w.reports.push(result.report);
  // Where the nodes stand from here, learned while the resource is contended (the uncontended
  // path pays nothing for it): from plain fan-outs, whose requests all leave at once and whose
  // answers are taken as they come (behind the gate, a "held" waits for the gate's answer, and a
  // hand-over's requests are another caller's).
  if (result.fan && !handedOver && gate === undefined && !taken && (s.inLine || s.attempts > 1)) {
    const hot = w.hot;
    void result.fan.outcomes.then((outcomes) => noteRoundTrips(hot, outcomes));
  }
  if (racing !== undefined) {
    const gateOutcome = result.report.nodes[w.gate]?.outcome;
    if (gateOutcome === "pending" && result.fan) void result.fan.outcomeOf(w.gate).then(racing, racing);
    else racing();
  }
  // A gate that timed out on a poll but answers in a fan-out is back: wait in line again. The
  // vote is often decided before the gate answers (a quorum of the others said "held"): then its
  // answer, if it comes within the request deadline, says so. Read only at settlement, a gate
  // slower than the other nodes never came back: under load, waiters kept fanning out until
  // their attempts ran out, splitting the votes (the chaos hot-key scenario beside busy loops).
  if (s.gateDown) {
    const noteGate = (outcome: NodeOutcomeKind | undefined) => {
      if (outcome === "held" || outcome === "acquired") s.gateDown = false;
    };
    const gateOutcome = result.report.nodes[w.gate]?.outcome;
    noteGate(gateOutcome);
    if (gateOutcome === "pending" && !result.lock) void result.fan?.outcomeOf(w.gate).then((o) => noteGate(o.outcome));
  }
  // Granted without the gate's take (a quorum of the others): step out of line at once, or
  // those behind us would wait for our lease to run out. A release that handed the gate's keys
  // over to us took us out of its line, as a take does: its answer tells.
  if (result.lock) {
    const fan = result.fan;
    if (handedOver && fan)
      void fan.outcomeOf(w.gate).then((gate) => (gate.outcome === "acquired" ? undefined : leave(w)));
    else leave(w);
  }
  return result;
}

/**
 * Marks a plain fan-out as racing for the gate node until it answers (a sibling's poll then only
 * queues up, see `in-line.ts`), at most a request deadline; returns what ends the mark.
 */
function race(w: Waiter): () => void {
  const hot = w.hot;
  const id = nextEntryId("racing");
  hot.occupy(w.hotKey, id, w.now() + w.o.requestTimeoutMs, "racing");
  return () => hot.leave(w.hotKey, id);
}

/**
 * Averages the round trips of `outcomes` into the isolate's (see `HotResources.nodeRtts`): only
 * answers to a single request each (asked again, a node's latency measures more than a round
 * trip), and not node `except` (a request held back).
 */
export function noteRoundTrips(hot: HotResources, outcomes: readonly NodeOutcome[], except = -1): void {
  const rtts = hot.nodeRtts();
  outcomes.forEach((outcome, i) => {
    const kind = outcome.outcome;
    if (i === except || outcome.requests !== 1 || outcome.latencyMs === undefined) return;
    if (kind === "pending" || isFailure(kind)) return;
    hot.setNodeRtt(i, distanceRtt(rtts[i] ?? 0, outcome.latencyMs));
  });
}
