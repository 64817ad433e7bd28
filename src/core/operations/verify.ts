/**
 * Verifying a lock on the nodes: one round trip reading each node's PTTL for our token.
 * @module
 */

import { LockLostError } from "../../base/errors.js";
import type { Engine } from "../engine.js";
import type { Lock, VerifyResult } from "../lock.js";
import { verifyOnNode } from "../node-operations.js";
import type { RedlockOptions } from "../options.js";
import { driftMs, refusalReason } from "../quorum.js";

/**
 * `lock.verify()`: the smaller of the local deadline and what the nodes' own clocks say is left.
 * @param verify one node's remaining TTL for the token (-1 when not held): a primitive that keeps
 *   other structures per node (a read-write lock's readers) passes its own. @default the plain lock's
 */
export async function verifyLock(
  engine: Engine,
  lock: Lock,
  overrides: RedlockOptions | undefined,
  verify: typeof verifyOnNode = verifyOnNode,
): Promise<VerifyResult> {
  const o = engine.resolveFor(lock.options, overrides, lock.ttlMs);
  const pttls: (number | undefined)[] = [];
  const { report, startedAt, decidedAt } = await engine.vote(o, "verify", lock.resources, 1, undefined, {
    yes: "verified",
    task: async (i, context) => {
      const pttl = await verify(engine.node(i), lock.keys, lock.token, context);
      pttls[i] = pttl;
      return pttl > 0 ? "verified" : "held";
    },
  });
  // The servers' own clocks decide expiry: the quorum-th longest PTTL, less the time since the
  // request left and the drift allowance, bounds what is left.
  const remaining = pttls.filter((p): p is number => p !== undefined && p > 0).sort((a, b) => b - a);
  const quorumPttl = remaining[o.quorum - 1];
  // A released lock is not held, even where its keys live on: a release may pass them on (see handoff.ts).
  const local = lock.released ? 0 : lock.remainingMs();
  if (quorumPttl === undefined) {
    if (
      !report.ok &&
      refusalReason(
        report.nodes.map((n) => n.outcome),
        o.quorum,
      ) === "held"
    ) {
      lock.lose(
        new LockLostError(`lock on ${lock.resources.join(", ")} is no longer held on a quorum`, { attempts: [report] }),
      );
    }
    return { held: false, remainingMs: Math.min(local, 0), report };
  }
  const serverRemaining = quorumPttl - (decidedAt - startedAt) - driftMs(quorumPttl, o.driftFactor);
  const remainingMs = Math.min(local, serverRemaining);
  const held = report.ok && remainingMs > o.minValidityMs;
  return { held, remainingMs: held ? remainingMs : Math.min(remainingMs, 0), report };
}
