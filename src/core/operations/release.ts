/**
 * Releasing a lock: compare-and-`DEL` on every node, whether or not each was locked. Settles as
 * soon as the outcome is clear; slow nodes finish in the background.
 * @module
 */

import type { Engine, Vote } from "../engine.js";
import type { FanOut } from "../fanout.js";
import type { Lock, ReleaseResult } from "../lock.js";
import { releaseOnNode } from "../node-operations.js";
import type { ResolvedOptions } from "../options.js";
import type { ClientWaiting, ReleasePart } from "../waiting.js";
import { cleanUpAcquisition, mayHaveApplied, type NodeRelease } from "./cleanup.js";

/**
 * Release `keys` held with `token` on every node. Never throws for node failures. `lock`: the lock
 * released, when it is released through `lock.release()`. The client's waiting strategy may play
 * some nodes' part (see `waiting.ts`): the default one tells the gate node, and may hand the lock
 * over to the next waiter of this isolate in the same requests.
 * @param release the compare-and-`DEL` of one node. @default the plain lock's
 */
export function releaseKeys(
  engine: Engine,
  o: ResolvedOptions,
  resources: readonly string[],
  keys: readonly string[],
  token: string,
  waiting: ClientWaiting,
  lock?: Lock,
  release: NodeRelease = releaseOnNode,
): Promise<ReleaseResult> {
  let part: ReleasePart | undefined;
  let voting: Promise<Vote>;
  try {
    part = waiting.release?.({ options: o, resources, keys, token, lock });
    // Read before the first request is sent: a lock handed over counts its validity from here.
    const sentAt = o.clock.now();
    voting = engine.vote(o, "release", resources, 1, undefined, {
      yes: "released",
      task: (i, context) => part?.task(i, context) ?? release(engine.node(i), keys, token, context),
    });
    part?.sent?.(sentAt);
  } catch (error) {
    return Promise.reject(error);
  }
  // A reaction rather than an async function: one promise and frame fewer on every release.
  return voting.then((vote) => released(engine, o, part, vote));
}

/** The release's result once its vote was decided; the nodes still answering go on in the background. */
function released(engine: Engine, o: ResolvedOptions, part: ReleasePart | undefined, vote: Vote): ReleaseResult {
  const { report, fan } = vote;
  part?.decided?.(report.nodes, fan);
  // Nodes still answering finish by the fan-out's deadline, in the background (`settled()` waits
  // for them). Asked of the fan-out now rather than of the report: nodes only a little slower
  // than the quorum have often answered since the vote was decided, and need no tracking.
  if (!allAnswered(fan, report.nodes.length)) engine.background.track(fan.outcomes, o.requestTimeoutMs + 1000);
  return { released: report.votes, nodes: report.nodes, report };
}

/**
 * `lock.release()` with the lock's own options. A node whose acquire request had no definite
 * answer may still apply that `SET` after our `DEL`: it is released again once that request has
 * finished, and swept, in the background.
 * @param release the compare-and-`DEL` of one node. @default the plain lock's
 */
export function releaseLock(
  engine: Engine,
  waiting: ClientWaiting,
  lock: Lock,
  release?: NodeRelease,
): Promise<ReleaseResult> {
  const fan = lock.acquireFan;
  const count = lock.acquireReport.nodes.length;
  // Common case: every acquire request had a definite answer before the release was sent (the
  // report, taken at the quorum, may still show some as pending); nothing can land after our DEL.
  let mayLandLater = false;
  for (let i = 0; i < count && !mayLandLater; i++) {
    const outcome = fan.knownOutcome(i);
    mayLandLater = !fan.isFinished(i) || outcome === undefined || mayHaveApplied(outcome);
  }
  // The common case returns the release's own promise (no async wrapper around it).
  if (!mayLandLater)
    return releaseKeys(engine, lock.options, lock.resources, lock.keys, lock.token, waiting, lock, release);
  // Which acquire requests had finished when the release was sent: read before it is.
  const finishedAtRelease = Array.from({ length: count }, (_, i) => fan.isFinished(i));
  return releaseKeys(engine, lock.options, lock.resources, lock.keys, lock.token, waiting, lock, release).then(
    (result) => {
      cleanUpAcquisition(engine, lock, lock.token, fan, finishedAtRelease, undefined, release);
      return result;
    },
  );
}

/** Whether every node of `fan` has answered by now. */
function allAnswered(fan: FanOut, count: number): boolean {
  for (let i = 0; i < count; i++) if (fan.knownOutcome(i) === undefined) return false;
  return true;
}
