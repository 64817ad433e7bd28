/**
 * Extending a lock: compare-and-`PEXPIRE` on every node. It never revives an expired or foreign
 * key, and the new deadline replaces the old one, shorter or longer.
 * @module
 */
import type { Engine } from "../engine.js";
import { ExtendError, ExtensionLimitError, LockExpiredError, LockLostError } from "../errors.js";
import { assertQuarantineCovers } from "../fencing/arithmetic.js";
import type { Lock } from "../lock.js";
import { extendOnNode } from "../node-operations.js";
import type { RedlockOptions, ResolvedOptions } from "../options.js";
import { validateTtl } from "../options.js";
import { driftMs, refusalReason } from "../quorum.js";
import type { AttemptReport } from "../report.js";
import { summary } from "./summary.js";

/**
 * Extend `keys` held with `token` to `ttlMs` from now. Throws {@link ExtendError}; its cause is a
 * {@link LockLostError} when a quorum no longer holds the token.
 */
export async function extendKeys(
  engine: Engine,
  o: ResolvedOptions,
  resources: readonly string[],
  keys: readonly string[],
  token: string,
  ttlMs: number,
  attempt: number,
): Promise<{ report: AttemptReport; deadline: number }> {
  const what = resources.join(", ");
  const { report, deadline } = await engine.vote(o, "extend", resources, attempt, ttlMs, {
    yes: "extended",
    task: (i, context) => extendOnNode(engine.node(i), keys, token, ttlMs, context),
  });
  if (report.ok) return { report, deadline };
  if (report.votes >= o.quorum) {
    throw new ExtendError(`extended ${what} with only ${Math.round(report.validityMs ?? 0)} ms of validity left`, [
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
    throw new ExtendError(`could not extend ${what}: the lock is no longer held (${summary(report)})`, [report], lost);
  }
  throw new ExtendError(`could not extend ${what}: ${summary(report)}`, [report]);
}

/** `lock.extend(ttlMs, overrides)`: the lock's own options, the call's overrides on top. */
export async function extendLock(
  engine: Engine,
  lock: Lock,
  ttlMs: number,
  overrides: RedlockOptions | undefined,
): Promise<AttemptReport> {
  validateTtl(ttlMs);
  const o = engine.resolveFor(lock.options, overrides, lock.ttlMs);
  validateTtl(ttlMs, o);
  // A lost node's quarantine must outlast every key it may have held: fenced keys never live longer.
  if (lock.fence !== undefined) assertQuarantineCovers(ttlMs, o.quarantineMs, o.driftFactor);
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
  // Read before the first send: a failed extension that reached some nodes set their keys to
  // expire `ttlMs` after some moment later than this.
  const startedAt = o.clock.now();
  try {
    const { report, deadline } = await extendKeys(
      engine,
      o,
      lock.resources,
      lock.keys,
      lock.token,
      ttlMs,
      lock.extensions + 1,
    );
    lock.extended(deadline, ttlMs);
    return report;
  } catch (error) {
    // Nodes whose answer was lost, late or a timeout may have applied the PEXPIRE: when it was
    // shorter than what was left, their keys now expire sooner than the lock claimed.
    lock.capDeadline(startedAt + ttlMs - driftMs(ttlMs, o.driftFactor));
    if (error instanceof ExtendError && error.cause instanceof LockLostError) lock.lose(error.cause);
    throw error;
  }
}
