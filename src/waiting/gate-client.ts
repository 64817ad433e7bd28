/**
 * A waiter's requests to its gate node: polls (take, aim, wait), leaving the line, and the
 * placeholder a take leaves on a gate out of step. Each answer updates the waiter's state.
 * @module
 */

import type { NodeOutcome } from "../base/report.js";
import { checkBudget } from "../core/backoff-waiting.js";
import { callHook } from "../core/engine.js";
import type { TaskContext } from "../core/fanout.js";
import { type AttemptResult, abortedError, finalOutcomes } from "../core/operations/acquire.js";
import { refusalReason } from "../core/quorum.js";
import { type GateAnswer, type GateMode, pollGate } from "./gate.js";
import { averageRtt, MAX_POLLS_PER_SECOND, placeholderMs } from "./pacing.js";
import type { Waiter } from "./state.js";

/** One poll of the gate, as a one-node fan-out: the same deadline, abort and hooks as every request. */
export async function poll(w: Waiter, mode: GateMode, token: string, leaseMs: number): Promise<GateAnswer> {
  const nodeCount = w.engine.nodes.length;
  checkBudget(w.request, w.reports, w.requestsSent(), 1, nodeCount);
  const sent = w.state.recentPolls;
  sent.push(w.now());
  if (sent.length > MAX_POLLS_PER_SECOND) sent.shift();
  let answer: GateAnswer | undefined;
  const fan = w.engine.fan(
    w.o,
    "acquire",
    w.request.resources,
    {
      yes: "acquired",
      signal: w.signal,
      meter: w.request.meter,
      task: async (_, context) => {
        answer = await pollOn(w, context, mode, token, leaseMs);
        return "acquired";
      },
    },
    w.o.requestTimeoutMs,
    [w.gate],
  );
  const [outcome] = await fan.outcomes;
  if (w.o.onPoll && outcome) callHook(w.o.onPoll, pollEvent(w, outcome, answer));
  if (outcome?.outcome === "aborted") throw abortedError(w.request.resources, w.reports, w.signal?.reason);
  if (answer === undefined) throw outcome?.error ?? new Error("the gate did not answer");
  return answer;
}

/** What `onPoll` is told: the gate's answer as `acquired` (taken) or `held` (in line at `rank`). */
function pollEvent(w: Waiter, outcome: NodeOutcome, answer: GateAnswer | undefined) {
  const { resources } = w.request;
  if (answer === undefined) return { resources, outcome };
  return answer.taken
    ? { resources, outcome: { ...outcome, outcome: "acquired" as const } }
    : { resources, outcome: { ...outcome, outcome: "held" as const }, rank: answer.rank };
}

/**
 * One poll within a request already under way (a poll's own fan-out, or the gate's part of an
 * attempt): counts it, measures its round trip, and records our place in line from the answer.
 */
export async function pollOn(
  w: Waiter,
  context: TaskContext,
  mode: GateMode,
  token: string,
  leaseMs: number,
): Promise<GateAnswer> {
  const s = w.state;
  s.polls++;
  const started = w.now();
  const answer = await pollGate(
    w.engine.node(w.gate),
    w.request.keys,
    {
      waiter: w.waiterId,
      mode,
      token,
      ttlMs: w.request.ttlMs,
      leaseMs,
      ticket: s.ticket,
      expectMs: w.hot.holdOf(w.hotKey),
    },
    context,
  );
  s.rttMs = averageRtt(s.rttMs, w.now() - started);
  s.leaseUntil = started + leaseMs;
  if (answer.ticket > 0 && !answer.taken) setTicket(w, answer.ticket);
  if (answer.taken) s.unreleasedTakes = answer.unreleasedTakes;
  // A take removes us from the line; any other answer means we stand in it.
  s.inLine = !answer.taken;
  s.firstInLine = !answer.taken && answer.rank === 0;
  s.rank = answer.taken ? -1 : answer.rank;
  return answer;
}

/** Our ticket in the gate's line, under which a release of this isolate tells us our turn. */
export function setTicket(w: Waiter, ticket: number): void {
  const s = w.state;
  if (ticket === s.ticket) return;
  if (s.ticket > 0) w.hot.stopWaiting(w.hotKey, s.ticket);
  s.ticket = ticket;
  w.hot.waitHere(w.hotKey, ticket);
}

/**
 * Leave the gate's line when done another way or giving up, so those behind us need not wait
 * for our lease to run out, and take our placeholder (if we left one) off the gate. Sent in the
 * background: nobody waits for it.
 */
export function leave(w: Waiter): void {
  if (!w.owesLeave) return;
  const s = w.state;
  const placeholder = s.placeholderToken;
  s.inLine = false;
  s.placeholderToken = undefined;
  const node = w.engine.node(w.gate);
  const work = w.engine
    .fan(
      w.o,
      "acquire",
      w.request.resources,
      {
        yes: "acquired",
        // Counted by the call's budget, which kept it in reserve (see `Waiter.requestsSent`).
        meter: w.request.meter,
        task: async (_, context) => {
          await pollGate(
            node,
            w.request.keys,
            { waiter: w.waiterId, mode: "leave", token: placeholder ?? "-", ttlMs: 1, leaseMs: 0, ticket: 0 },
            context,
          );
          return "acquired";
        },
      },
      w.o.requestTimeoutMs,
      [w.gate],
    )
    .outcomes.then(() => undefined);
  w.engine.background.track(work, w.o.requestTimeoutMs + 1000);
}

/** How long a placeholder we leave on the gate now would last (see `pacing.placeholderMs`). */
export function currentPlaceholderMs(w: Waiter): number {
  const s = w.state;
  return placeholderMs({
    requestTimeoutMs: w.o.requestTimeoutMs,
    rttMs: s.rttMs,
    holdMs: s.holdMs,
    outOfStep: s.outOfStep,
    unreleasedTakes: s.unreleasedTakes,
    ttlMs: w.request.ttlMs,
  });
}

/**
 * We took the gate but the others hold another token: the gate lost track (a restart, or a
 * fresh client's keys), or, most often under contention, a waiter won the other nodes while the
 * gate still saw the previous holder (its release reached the nodes in a different order). Our
 * key stays on the gate as a placeholder, longer each time, so that a gate out of step costs
 * fan-outs at a shrinking rate while the waiters poll one node; we poll again when it runs out
 * (before, a poll would only find our own placeholder). Judged by every node's answer, as the
 * attempt's cleanup judges whether to keep the key (see `cleanUpAcquisition`): the vote is often
 * decided before the last "held" comes in, and with a node down, "held" on two of five and one
 * answer pending read as an outage, the key was released, and the line took the gate again at
 * once, a fan-out each time.
 */
export async function growPlaceholder(w: Waiter, result: AttemptResult, token: string): Promise<void> {
  const outcomes = (await finalOutcomes(result, w.o.quorum)).map((n) => n.outcome);
  if (refusalReason(outcomes, w.o.quorum) === "held") keepPlaceholder(w, token, currentPlaceholderMs(w));
}

/** Our key on the gate, set with `token`, stays there as a placeholder for `ms`: we poll again once it runs out. */
export function keepPlaceholder(w: Waiter, token: string, ms: number): void {
  const s = w.state;
  s.placeholderUntil = w.now() + ms;
  s.outOfStep++;
  s.placeholderToken = token;
}
