/**
 * Undoing a failed attempt. Off the critical path, in the background, with deadlines of its own.
 *
 * A node that answered "held" wrote nothing (SET NX and the all-or-none script are atomic) and
 * needs no request. Every other node may hold our key, now or later:
 * - a node that said "acquired" holds it now: one release undoes it for good;
 * - a node that timed out, was aborted or failed says nothing of what the server did, and its
 *   `SET` may still land after our release (a slow network can reorder the two): it is released
 *   once its request has finished, then swept again with a doubling interval until a sweep finds
 *   and deletes the key (the SET was sent once, so it cannot land twice) or the attempt's TTL has
 *   run out since the SET was sent, after which anything it wrote has expired anyway, unless the
 *   network held the request back for longer than a whole TTL.
 *
 * Each release gets `cleanupTimeoutMs`, long enough for `EVALSHA` and the `EVAL` fallback of a
 * node whose script cache is cold (two round trips) on a slow node.
 * @module
 */

import { ConfigurationError } from "../../base/errors.js";
import type { NodeOutcome, NodeOutcomeKind } from "../../base/report.js";
import { backgroundTimeout } from "../../base/signals.js";
import type { RedisNode } from "../../transport/rest.js";
import { callHook, type Engine } from "../engine.js";
import { type AcquireFan, fanOut, type TaskContext } from "../fanout.js";
import { extendOnNode, releaseOnNode } from "../node-operations.js";
import { type AcquireRequest, withinBudget } from "../options.js";
import { isFailure, refusalReason } from "../quorum.js";

/**
 * The compare-and-`DEL` of one node: the plain lock's by default; a primitive that keeps other
 * structures per node (a read-write lock's readers) passes its own.
 */
export type NodeRelease = (
  node: RedisNode,
  keys: readonly string[],
  token: string,
  context: TaskContext,
) => Promise<NodeOutcomeKind>;

/** Deadline of one cleanup release: several request deadlines, at least 1 s, at most the TTL. */
export function cleanupTimeoutMs(requestTimeoutMs: number, ttlMs: number): number {
  return Math.min(ttlMs, Math.max(4 * requestTimeoutMs, 1000));
}

/**
 * Release, in the background, whatever an acquisition with `token` may have written.
 * @param releasedOn the acquisition succeeded and its lock was just released on every node:
 *   per node, whether its acquire request had finished when that release was sent. Only the nodes
 *   whose acquire request was unfinished then, or had no definite answer, still need a release.
 * @param release the compare-and-`DEL` of one node. @default the plain lock's ({@link releaseOnNode})
 */
export function cleanUpAcquisition(
  engine: Engine,
  request: AcquireRequest,
  token: string,
  fan: AcquireFan,
  releasedOn?: readonly boolean[],
  placeholder?: { readonly index: number; readonly holdMs: number },
  release: NodeRelease = releaseOnNode,
): void {
  const { ttlMs, options } = request;
  const timeoutMs = cleanupTimeoutMs(options.requestTimeoutMs, ttlMs);
  const needsUndo = (outcome: NodeOutcome, index: number) =>
    mayHaveApplied(outcome) || (outcome.outcome === "acquired" && releasedOn?.[index] !== true);
  // The call's budget counts what its cleanup sends before it returns (see `RequestMeter`): a
  // request is owed now for every node that may need one, before the last answers are in, so that
  // the call's next check already sees it. Each node's first request is counted as it is sent,
  // and the debt then paid off.
  const meter = request.meter;
  const owes = fan.finished.map((_, index) => {
    const known = fan.knownOutcome(index);
    return known === undefined || needsUndo(known, index);
  });
  if (meter !== undefined) for (const owed of owes) if (owed) meter.sent++;
  const paid = (index: number) => {
    if (meter !== undefined && owes[index] === true) meter.sent--;
    owes[index] = false;
  };
  const work = fan.outcomes.then((outcomes) => {
    // A placeholder only where every answer says the others hold another token.
    const keep =
      refusalReason(
        outcomes.map((o) => o.outcome),
        options.quorum,
      ) === "held"
        ? placeholder
        : undefined;
    return Promise.all(
      outcomes.map(async (outcome, index) => {
        const fateUnknown = mayHaveApplied(outcome);
        // Nothing to undo: a definite "held" or refusal wrote nothing, and a definite "acquired"
        // was already released if the lock's release reached it after the SET's answer.
        if (!needsUndo(outcome, index)) return paid(index);
        await fan.finished[index];
        if (keep?.index === index && outcome.outcome === "acquired") {
          // The gate said yes but the other nodes hold someone else's lock: the gate lost track
          // (a restart, a fresh client's keys). Keep our key there a while instead, so waiters
          // see the lock as held and keep polling with one request, rather than each taking the
          // gate in turn and fanning out to every node.
          const kept = await extendOne(engine, request, token, index, keep.holdMs, timeoutMs);
          paid(index);
          if (kept.outcome === "extended") return;
        }
        const first = await releaseOne(engine, request, token, index, timeoutMs, release);
        paid(index);
        if (!fateUnknown && !mayHaveApplied(first)) return;
        await sweep(engine, request, token, index, timeoutMs, fan.startedAt, first, release);
      }),
    );
  });
  // The sweep ends a TTL after the attempt started; its last release may take timeoutMs more.
  engine.background.track(work, ttlMs + 2 * timeoutMs);
}

/** Release again with a doubling interval until the key was found and deleted or the TTL ran out. */
async function sweep(
  engine: Engine,
  request: AcquireRequest,
  token: string,
  index: number,
  timeoutMs: number,
  sentAt: number,
  last: NodeOutcome,
  release: NodeRelease,
): Promise<void> {
  const { options } = request;
  let interval = Math.max(options.requestTimeoutMs, 10);
  let outcome = last;
  // While the call that failed here still runs, the node is swept once, and only when it answered
  // the cleanup's release (a node that did not is most likely down, and the call's own attempts
  // matter more than its budget spent there), with room left in the budget for one more attempt
  // and the lock's release: a `SET` of this attempt that landed after that release holds the lock,
  // the gate with it, and the call (with its line) would wait in line behind its own key for a
  // whole TTL. The rest of the sweep is background work, once the call has returned.
  let inCall = !mayHaveApplied(last);
  while (outcome.outcome !== "released") {
    const left = sentAt + request.ttlMs - options.clock.now();
    if (left <= 0) return;
    await pause(Math.min(interval, left));
    interval *= 2;
    const meter = request.meter;
    if (meter?.returned === false) {
      const nodeCount = engine.nodes.length;
      if (!inCall || !withinBudget(options, meter.sent, 1 + nodeCount, nodeCount)) continue;
      inCall = false;
    }
    outcome = await releaseOne(engine, request, token, index, timeoutMs, release);
  }
}

/**
 * Our key on node `index`, set with `token`, now lasts `holdMs`: one extend, counted by the call's
 * meter. A failure goes to `onNodeError`: refused, the key keeps the TTL its take set, and the
 * gate's line waits behind it.
 */
export async function extendOne(
  engine: Engine,
  request: AcquireRequest,
  token: string,
  index: number,
  holdMs: number,
  timeoutMs: number,
): Promise<NodeOutcome> {
  const node = engine.node(index);
  const fan = fanOut({
    nodeIds: [node.id],
    quorum: 1,
    yes: "extended",
    timeoutMs,
    clock: request.options.clock,
    meter: request.meter,
    task: (_, context) => extendOnNode(node, request.keys, token, holdMs, context),
    onNodeError: request.options.onNodeError,
    operation: "extend",
    resources: request.resources,
  });
  const [outcome] = await fan.outcomes;
  return outcome as NodeOutcome;
}

async function releaseOne(
  engine: Engine,
  request: AcquireRequest,
  token: string,
  index: number,
  timeoutMs: number,
  release: NodeRelease,
): Promise<NodeOutcome> {
  const { options, resources, keys } = request;
  const node = engine.node(index);
  const onNodeError = options.onNodeError;
  const fan = fanOut({
    nodeIds: [node.id],
    quorum: 1,
    yes: "released",
    timeoutMs,
    clock: options.clock,
    meter: request.meter,
    task: (_, context) => release(node, keys, token, context),
    onNodeSettled: onNodeError
      ? (outcome) => {
          if (outcome.outcome === "error" || outcome.outcome === "timeout") {
            callHook(onNodeError, { operation: "release", resources, outcome });
          }
        }
      : undefined,
  });
  const [outcome] = await fan.outcomes;
  return outcome as NodeOutcome;
}

/**
 * Whether a node's request may have been applied, or may still be, although we have no yes for
 * it: a timeout, an abort, a transport failure or a server error (a proxy may have passed the
 * command on). A redirect, a 4xx answer, rejected credentials (a `ConfigurationError`, from any
 * node implementation) or a Redis error reply is a definite "not applied".
 */
export function mayHaveApplied(outcome: NodeOutcome): boolean {
  if (!isFailure(outcome.outcome)) return false;
  if (outcome.error instanceof ConfigurationError) return false;
  if (outcome.status !== undefined && outcome.status >= 300 && outcome.status < 500) return false;
  return (outcome.error as { redisError?: unknown } | undefined)?.redisError === undefined;
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => backgroundTimeout(resolve, ms));
}
