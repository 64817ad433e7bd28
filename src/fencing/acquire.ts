/**
 * One fenced acquisition attempt: the two phases of `fencing/attempt.ts` (lock and read the
 * counters, then the conditional write-back), validity counted from before phase 1, and on failure
 * the same cleanup as a plain attempt.
 * @module
 */

import { FencingError } from "../base/errors.js";
import type { AttemptReport, NodeOutcome } from "../base/report.js";
import { callHook } from "../core/engine.js";
import type { AcquireFan, FanOut } from "../core/fanout.js";
import { Lock } from "../core/lock.js";
import type { Attempt } from "../core/operations/acquire.js";
import { cleanUpAcquisition } from "../core/operations/cleanup.js";
import { isFailure, validityMs } from "../core/quorum.js";
import { randomToken } from "../core/token.js";
import { assertQuarantineCovers } from "./arithmetic.js";
import { fencedAttempt } from "./attempt.js";

/**
 * Make one fenced attempt on every node. Never throws for node failures.
 * @throws {FencingError} `FENCING_UNINITIALIZED` when no node carries a marker yet.
 * @throws {InvalidArgumentError} when the TTL outlasts `quarantineMs`.
 */
export const attemptFenced: Attempt = async (engine, request, attempt, signal, operations, polls) => {
  const { resources, keys, ttlMs, options: o } = request;
  assertQuarantineCovers(ttlMs, o.quarantineMs, o.driftFactor);
  const token = randomToken();
  const result = await fencedAttempt({
    nodes: engine.nodes,
    keyPrefix: o.keyPrefix,
    resources,
    token,
    ttlMs,
    quorum: o.quorum,
    requestTimeoutMs: o.requestTimeoutMs,
    quarantineMs: o.quarantineMs,
    clock: o.clock,
    signal,
    meter: request.meter,
  });
  engine.background.track(result.maintenance, 2 * o.requestTimeoutMs + 1000);
  const validity = validityMs(ttlMs, result.startedAt, result.decidedAt, o.driftFactor);
  const phase1 = result.phases[0]?.nodes ?? [];
  const last = result.phases.at(-1);
  const report: AttemptReport = {
    operation: "acquire",
    attempt,
    resources,
    quorum: o.quorum,
    votes: (last?.phase === "ratchet" ? last.nodes : phase1).filter(
      (n) => n.outcome === (last?.phase === "ratchet" ? "fenced" : "acquired"),
    ).length,
    elapsedMs: result.decidedAt - result.startedAt,
    validityMs: validity,
    ok: result.granted && validity > o.minValidityMs,
    nodes: phase1,
    requests: result.requests,
    ...(polls ? { polls } : {}),
  };
  callHook(o.onAttempt, report);
  const fan = fanOfPhase1(result.acquireFan);
  if (report.ok) {
    const lock = new Lock({
      resources,
      keys,
      token,
      ttlMs,
      startedAt: result.startedAt,
      deadline: result.decidedAt + validity,
      options: o,
      report,
      operations,
      acquireFan: fan,
      fence: result.fence,
    });
    return { lock, report };
  }
  cleanUpAcquisition(engine, request, token, fan);
  if (result.reason === "uninitialized") {
    throw new FencingError(
      "FENCING_UNINITIALIZED",
      "fencing is not initialised on these nodes: run initializeFencing(redlock) from edge-redlock/fencing once for the deployment",
      { attempts: [report] },
    );
  }
  return { report, token };
};

/**
 * Phase 1 as the cleanup sees an acquisition: a node whose request failed may still have applied
 * the fence-acquire script (its fate is unknown: treated as a timeout). Nodes still answering at
 * the decision count by their final answer. Before, they counted as timeouts whatever they
 * answered: a release then swept them until the TTL ran out, 15 requests for a release on 5 nodes.
 */
function fanOfPhase1(phase1: FanOut): AcquireFan {
  const fateUnknown = (n: NodeOutcome): NodeOutcome => (isFailure(n.outcome) ? { ...n, outcome: "timeout" } : n);
  return {
    startedAt: phase1.startedAt,
    outcomes: phase1.outcomes.then((outcomes) => outcomes.map(fateUnknown)),
    finished: phase1.finished,
    isFinished: phase1.isFinished,
    knownOutcome: (i) => {
      const outcome = phase1.knownOutcome(i);
      return outcome && fateUnknown(outcome);
    },
  };
}
