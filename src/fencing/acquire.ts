/**
 * One fenced acquisition attempt: the two phases of `fencing/attempt.ts` (lock and read the
 * counters, then the conditional write-back), validity counted from before phase 1, and on failure
 * the same cleanup as a plain attempt.
 * @module
 */

import { FencingError } from "../base/errors.js";
import type { AttemptReport, NodeOutcome } from "../base/report.js";
import { callHook, type Engine } from "../core/engine.js";
import type { AcquireFan, FanOut } from "../core/fanout.js";
import { RESERVED_KEY_PART } from "../core/keys.js";
import { Lock, type LockOperations } from "../core/lock.js";
import type { Attempt, AttemptResult, TakenGate } from "../core/operations/acquire.js";
import { cleanUpAcquisition, type NodeRelease } from "../core/operations/cleanup.js";
import type { AcquireRequest } from "../core/options.js";
import { isFailure, validityMs } from "../core/quorum.js";
import { randomToken } from "../core/token.js";
import { assertQuarantineCovers } from "./arithmetic.js";
import { type FencedAttemptOptions, fencedAttempt } from "./attempt.js";
import { fenceRwWriteOnNode } from "./node-operations.js";

/**
 * Make one fenced attempt on every node. Never throws for node failures.
 * @throws {FencingError} `FENCING_UNINITIALIZED` when no node carries a marker yet.
 * @throws {InvalidArgumentError} when the TTL outlasts `quarantineMs`.
 */
export const attemptFenced: Attempt = (engine, request, attempt, signal, operations, polls, taken) =>
  attemptWith(engine, request, attempt, signal, operations, polls, {}, taken);

/**
 * How a fenced attempt of another kind of lock differs from a mutex's: the counters' fields (the
 * lock's resources by default), its phase 1 on one node for a given token, and the release that
 * cleans up after a failed attempt.
 */
interface Variant {
  readonly fields?: readonly string[];
  readonly phase1?: (token: string) => FencedAttemptOptions["phase1"];
  readonly release?: NodeRelease;
}

/**
 * One fenced attempt of a read-write lock's write lock: `fence-rw-write` in phase 1 instead of
 * `fence-acquire`, then the same ratchet, maintenance and validity as a mutex. Its fence sequence
 * is its own: the counter's field is the write key without the `keyPrefix`, which lies in the
 * reserved namespace, where no mutex resource is allowed, so a mutex of the same name counts apart.
 * `request.keys`: the write key, the readers' sorted set, the writer-waiting mark. `writer`: the
 * waiting writer's id and its mark's TTL. `release`: the read-write lock's compare-and-DEL, to
 * clean up after a failed attempt. Never throws for node failures.
 * @throws {FencingError} `FENCING_UNINITIALIZED` when no node carries a marker yet.
 * @throws {InvalidArgumentError} when the TTL outlasts `quarantineMs`.
 */
export function attemptFencedWrite(
  engine: Engine,
  request: AcquireRequest,
  attempt: number,
  signal: AbortSignal | undefined,
  operations: LockOperations,
  writer: { readonly id: string; readonly ttlMs: number },
  release: NodeRelease,
): Promise<AttemptResult> {
  const { keys, options: o } = request;
  const writeKey = keys[0] ?? "";
  // Guards the field's namespace (the argument above); a caller's bug, not a user's input.
  if (keys.length !== 3 || !writeKey.startsWith(o.keyPrefix + RESERVED_KEY_PART)) {
    throw new Error("a fenced write lock's keys must be its write key (reserved), readers and mark");
  }
  const field = writeKey.slice(o.keyPrefix.length);
  return attemptWith(engine, request, attempt, signal, operations, undefined, {
    fields: [field],
    phase1: (token) => (node, fencing, context) =>
      fenceRwWriteOnNode(node, fencing, keys, field, token, request.ttlMs, writer, context),
    release,
  });
}

async function attemptWith(
  engine: Engine,
  request: AcquireRequest,
  attempt: number,
  signal: AbortSignal | undefined,
  operations: LockOperations,
  polls: number | undefined,
  variant: Variant,
  taken?: TakenGate,
): Promise<AttemptResult> {
  const { resources, keys, ttlMs, options: o } = request;
  assertQuarantineCovers(ttlMs, o.quarantineMs, o.driftFactor);
  const token = taken?.token ?? randomToken();
  const result = await fencedAttempt({
    nodes: engine.nodes,
    keyPrefix: o.keyPrefix,
    resources: variant.fields ?? resources,
    phase1: variant.phase1?.(token),
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
  // A gate taken by a poll before this attempt holds our keys since that poll's send.
  const startedAt = Math.min(result.startedAt, taken?.startedAt ?? result.startedAt);
  const validity = validityMs(ttlMs, startedAt, result.decidedAt, o.driftFactor);
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
    elapsedMs: result.decidedAt - startedAt,
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
      startedAt,
      deadline: result.decidedAt + validity,
      options: o,
      report,
      operations,
      acquireFan: fan,
      fence: result.fence,
    });
    return { lock, report };
  }
  cleanUpAcquisition(engine, request, token, fan, undefined, undefined, variant.release);
  if (result.reason === "uninitialized") {
    throw new FencingError(
      "FENCING_UNINITIALIZED",
      "fencing is not initialised on these nodes: run initializeFencing(redlock) from edge-redlock/fencing once for the deployment",
      { attempts: [report] },
    );
  }
  return { report, token };
}

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
    isFinished: (i) => phase1.isFinished(i),
    knownOutcome: (i) => {
      const outcome = phase1.knownOutcome(i);
      return outcome && fateUnknown(outcome);
    },
  };
}
