/**
 * Extending a lock: compare-and-`PEXPIRE` on every node. It never revives an expired or foreign
 * key, and the new deadline replaces the old one, shorter or longer.
 * @module
 */

import { ExtendError, ExtensionLimitError, LockExpiredError, LockLostError } from "../../base/errors.js";
import type { AttemptReport } from "../../base/report.js";
import type { Engine, Vote } from "../engine.js";
import type { AcquireFan } from "../fanout.js";
import type { Lock } from "../lock.js";
import { extendOnNode } from "../node-operations.js";
import type { RedlockOptions, ResolvedOptions } from "../options.js";
import { refusalReason } from "../quorum.js";
import { validateTtl } from "../validate.js";
import { fencingOf } from "./acquire.js";
import { mayHaveApplied } from "./cleanup.js";
import { summary } from "./summary.js";

/**
 * Extend `keys` held with `token` to `ttlMs` from now. Throws {@link ExtendError}; its cause is a
 * {@link LockLostError} when a quorum no longer holds the token.
 */
export async function extendKeys(...args: Parameters<typeof voteExtend>): Promise<Vote> {
  const vote = await voteExtend(...args);
  const failure = extendFailure(vote.report, vote.report.resources, args[1]);
  if (failure) throw failure;
  return vote;
}

/** The compare-and-`PEXPIRE` of one node: the plain lock's by default (see {@link extendLock}). */
export type NodeExtend = typeof extendOnNode;

function voteExtend(
  engine: Engine,
  o: ResolvedOptions,
  resources: readonly string[],
  keys: readonly string[],
  token: string,
  ttlMs: number,
  attempt: number,
  extend: NodeExtend = extendOnNode,
  acquisition?: AcquireFan,
): Promise<Vote> {
  return engine.vote(o, "extend", resources, attempt, ttlMs, {
    yes: "extended",
    task: (i, context) => {
      if (acquisition === undefined || acquisition.isFinished(i)) {
        return extend(engine.node(i), keys, token, ttlMs, context);
      }
      // A lock's requests to one node go in order. The acquisition settled at a quorum; a node
      // still answering its SET is asked to extend once that SET has finished: sent at once, the
      // extension could overtake it, find no key, and leave the key to expire at the acquisition's TTL.
      return (acquisition.finished[i] as Promise<void>).then(() =>
        context.signal.aborted
          ? Promise.reject(context.signal.reason)
          : extend(engine.node(i), keys, token, ttlMs, context),
      );
    },
  });
}

/** Why an extension was not granted, as the error to throw; its cause is a {@link LockLostError} when a quorum no longer holds the token. */
function extendFailure(
  report: AttemptReport,
  resources: readonly string[],
  o: ResolvedOptions,
): ExtendError | undefined {
  if (report.ok) return undefined;
  const what = resources.join(", ");
  if (report.votes >= o.quorum) {
    return new ExtendError(`extended ${what} with only ${Math.round(report.validityMs ?? 0)} ms of validity left`, [
      report,
    ]);
  }
  if (
    refusalReason(
      report.nodes.map((n) => n.outcome),
      o.quorum,
    ) === "held"
  ) {
    // A quorum no longer holds our token: the lock is gone, whatever the local deadline says.
    const lost = new LockLostError(`lock on ${what} is no longer held on a quorum`, { attempts: [report] });
    return new ExtendError(`could not extend ${what}: the lock is no longer held (${summary(report)})`, [report], lost);
  }
  return new ExtendError(`could not extend ${what}: ${summary(report)}`, [report]);
}

/**
 * `lock.extend(ttlMs, overrides)`: the lock's own options, the call's overrides on top.
 * @param extend the compare-and-`PEXPIRE` of one node: a primitive that keeps other structures per
 *   node (a read-write lock's readers) passes its own. @default the plain lock's
 */
export async function extendLock(
  engine: Engine,
  lock: Lock,
  ttlMs: number,
  overrides: RedlockOptions | undefined,
  extend?: NodeExtend,
): Promise<AttemptReport> {
  validateTtl(ttlMs);
  const o = engine.resolveFor(lock.options, overrides, lock.ttlMs);
  validateTtl(ttlMs, o);
  // A lost node's quarantine must outlast every key it may have held: fenced keys never live longer.
  if (lock.fence !== undefined) fencingOf(lock.options)?.checkExtension(ttlMs, o);
  const what = lock.resources.join(", ");
  if (lock.released) throw new LockExpiredError(`lock on ${what} was released; acquire it again`);
  if (lock.remainingMs() <= 0) throw new LockExpiredError(`lock on ${what} has expired; acquire it again`);
  if (lock.extensions >= o.maxExtensions) {
    throw new ExtensionLimitError(`lock on ${what} was already extended ${lock.extensions} times (maxExtensions)`);
  }
  if (o.maxHoldMs !== undefined && o.clock.now() + ttlMs - lock.startedAt > o.maxHoldMs) {
    throw new ExtensionLimitError(
      `extending lock on ${what} by ${ttlMs} ms would hold it past maxHoldMs ${o.maxHoldMs}`,
    );
  }
  // Read before the first send: wherever its requests land, they set the keys to expire `ttlMs`
  // after some moment later than this, whether the extension is granted or not.
  const extension = lock.extensionStarted(o.clock.now(), ttlMs);
  let vote: Vote;
  try {
    vote = await voteExtend(
      engine,
      o,
      lock.resources,
      lock.keys,
      lock.token,
      ttlMs,
      lock.extensions + 1,
      extend,
      lock.acquireFan,
    );
  } catch (error) {
    // The caller's abort or a configuration error: nothing says which requests were applied.
    lock.extensionFinished(extension, true);
    throw error;
  }
  // The answers that come after the vote was decided still tell which requests may land later.
  void vote.fan.outcomes.then((outcomes) => lock.extensionFinished(extension, outcomes.some(mayHaveApplied)));
  const failure = extendFailure(vote.report, lock.resources, o);
  if (failure === undefined) {
    lock.extended(extension, vote.startedAt, ttlMs);
    return vote.report;
  }
  if (failure.cause instanceof LockLostError) lock.lose(failure.cause);
  throw failure;
}
