/**
 * Releasing a lock: compare-and-`DEL` on every node, whether or not each was locked. Settles as
 * soon as the outcome is clear; slow nodes finish in the background.
 * @module
 */

import type { NodeOutcome } from "../../base/report.js";
import { HandoffOutcomes } from "../../isolate/handoff.js";
import {
  type EndedHold,
  type GateRelease,
  gateIndex,
  hotKeyOf,
  type Place,
  releaseOnGate,
} from "../../waiting/gate.js";
import type { Engine } from "../engine.js";
import type { Lock, ReleaseResult } from "../lock.js";
import { handOverOnNode, releaseOnNode } from "../node-operations.js";
import type { ResolvedOptions } from "../options.js";
import { isFailure } from "../quorum.js";
import { randomToken } from "../token.js";
import { cleanUpAcquisition, mayHaveApplied } from "./cleanup.js";

/** How long a resource counts as contended after a release found waiters in line, in ms. */
const HOT_AFTER_RELEASE_MS = 2000;

/**
 * Release `keys` held with `token` on every node. Never throws for node failures. `hold`: what is
 * known of the hold, for the gate's record of how long holds last. When the first in line of this
 * isolate offered to take the lock over, the same requests hand it over (see `handoff.ts`).
 */
export async function releaseKeys(
  engine: Engine,
  o: ResolvedOptions,
  resources: readonly string[],
  keys: readonly string[],
  token: string,
  hold: EndedHold = { ttlMs: 0, gateLeadMs: 0 },
): Promise<ReleaseResult> {
  // The gate node also says how many wait in line: this client's next acquisition of the same
  // resource then queues up behind them instead of jumping the line (see waiting/). A client
  // that waited for this resource recently is likely to come back for it: its release takes a
  // place at the back of the line in the same request, which saves that acquisition its first poll.
  const gate = gateIndex(keys, engine.nodes.length);
  const hotKey = hotKeyOf(keys);
  const requeue = engine.hot.isHot(hotKey, o.clock.now())
    ? { waiter: randomToken(), leaseMs: HOT_AFTER_RELEASE_MS }
    : undefined;
  let keep: (place: Place | undefined) => void = () => {};
  if (requeue)
    engine.hot.keepPlace(hotKey, new Promise((resolve) => (keep = resolve)), o.clock.now() + o.requestTimeoutMs);
  const next = engine.hot.claimHandoff(hotKey, keys);
  const handoff = next && new HandoffOutcomes(next, engine.nodes.length);
  const sentAt = o.clock.now();
  const voting = engine.vote(o, "release", resources, 1, undefined, {
    yes: "released",
    task: async (i, context) => {
      if (i !== gate) {
        if (!handoff) return releaseOnNode(engine.node(i), keys, token, context);
        const request = handOverOnNode(engine.node(i), keys, token, handoff.offer, context);
        const reply = handoff.route(i, request, (r) => r.taken);
        return (await reply).released ? "released" : "not-held";
      }
      let answer: GateRelease;
      try {
        const request = releaseOnGate(engine.node(i), keys, token, hold, context, requeue, next);
        answer = await (handoff ? handoff.route(i, request, (r) => r.handedOver) : request);
      } catch (error) {
        keep(undefined);
        throw error;
      }
      const now = o.clock.now();
      if (answer.waiting > 0 || answer.handedOver) engine.hot.mark(hotKey, now, HOT_AFTER_RELEASE_MS);
      // The first in line now, if it waits in this isolate, learns it without a poll.
      if (answer.headTicket > 0) engine.hot.turnOf(hotKey, answer.headTicket, answer.handedOver ? "first" : "free");
      keep(requeue && answer.ticket > 0 ? placeOf(requeue, answer, now, now - sentAt) : undefined);
      return answer.outcome;
    },
  });
  // The requests are on their way: the next holder's attempt counts from before they were sent.
  handoff?.offer.accept(handoff.outcome, sentAt);
  const { report, fan } = await voting;
  // Nodes still answering when the outcome was clear finish in the background, by the fan-out's
  // deadline. A gate that missed the release would keep the key until its TTL runs out, and its
  // line would wait for it as for a holder that died while the other nodes are free: a release the
  // gate failed or did not answer in time is sent to it once more, so that a dropped request costs
  // a request, not the TTL. (Deadline: two request deadlines and a margin for the timers' delay.)
  const gateFailed = isFailure((report.nodes[gate] as NodeOutcome).outcome);
  if (gateFailed || report.nodes.some((n) => n.outcome === "pending")) {
    // As a fan-out to the gate alone: the same deadline, abort and hooks as every request.
    const releaseGateAgain = () =>
      engine.fan(
        o,
        "release",
        resources,
        {
          yes: "released",
          task: async (i, context) => (await releaseOnGate(engine.node(i), keys, token, hold, context)).outcome,
        },
        o.requestTimeoutMs,
        [gate],
      ).outcomes;
    const settled = fan.outcomes.then((outcomes) =>
      isFailure((outcomes[gate] as NodeOutcome).outcome) ? releaseGateAgain() : undefined,
    );
    engine.background.track(settled, 2 * o.requestTimeoutMs + 1000);
  }
  return { released: report.votes, nodes: report.nodes, report };
}

/** The place a release kept at the back of the line, as a poll from there would have described it. */
function placeOf(requeue: { waiter: string; leaseMs: number }, answer: GateRelease, at: number, rttMs: number): Place {
  return {
    waiter: requeue.waiter,
    ticket: answer.ticket,
    at,
    rttMs,
    leaseMs: requeue.leaseMs,
    answer: {
      taken: false,
      rank: answer.waiting,
      // The lock is free at this moment: the first in line is about to take it.
      pttlMs: -2,
      freeInMs: 0,
      releasedAgoMs: -1,
      holdMs: answer.holdMs,
      ticket: answer.ticket,
      holdDeviationMs: answer.holdDeviationMs,
      cycleMs: answer.cycleMs,
      turns: answer.turns,
      contested: false,
      unreleasedTakes: 0,
    },
  };
}

/**
 * `lock.release()` with the lock's own options. A node whose acquire request had no definite
 * answer may still apply that `SET` after our `DEL`: it is released again once that request has
 * finished, and swept, in the background.
 */
export async function releaseLock(engine: Engine, lock: Lock): Promise<ReleaseResult> {
  engine.hot.leave(hotKeyOf(lock.keys), lock.token);
  const fan = lock.acquireFan;
  const finishedAtRelease = lock.acquireReport.nodes.map((_, i) => fan.isFinished(i));
  // Common case: every acquire request had a definite answer before the release was sent (the
  // report, taken at the quorum, may still show some as pending); nothing can land after our DEL.
  const mayLandLater = finishedAtRelease.some((finished, i) => {
    const outcome = fan.knownOutcome(i);
    return !finished || outcome === undefined || mayHaveApplied(outcome);
  });
  const result = await releaseKeys(engine, lock.options, lock.resources, lock.keys, lock.token, {
    ttlMs: lock.lastTtlMs,
    gateLeadMs: lock.gateLeadMs,
  });
  if (mayLandLater) cleanUpAcquisition(engine, lock, lock.token, fan, finishedAtRelease);
  return result;
}
