/**
 * Taking a lock that its release passed on (see `handoff.ts`): held at once, on the releasing
 * holder's quorum, and confirmed or found lost as the release's requests answer.
 * @module
 */
import type { Engine } from "../engine.js";
import { LockLostError } from "../errors.js";
import { gateIndex } from "../gate.js";
import type { PassedOn } from "../handoff.js";
import { Lock, type LockOperations } from "../lock.js";
import { driftMs } from "../quorum.js";
import type { AttemptReport } from "../report.js";
import type { AcquireRequest } from "./acquire.js";

/**
 * The lock `passed` on to `request`'s waiter. Its report counts the quorum it stands on and shows
 * every node pending: no request of its own was needed, and the release's requests are on their
 * way. When a quorum has set the keys again, its deadline becomes the one of an acquisition sent at
 * the release; when too few hold the token to make a quorum, it is lost.
 */
export function takePassedOn(
  engine: Engine,
  request: AcquireRequest,
  attempt: number,
  passed: PassedOn,
  operations: LockOperations,
  polls: number,
): Lock {
  const { resources, keys, ttlMs, options } = request;
  const now = options.clock.now();
  const report: AttemptReport = {
    operation: "acquire",
    attempt,
    resources,
    quorum: options.quorum,
    votes: options.quorum,
    elapsedMs: 0,
    validityMs: passed.deadline - now,
    ok: true,
    nodes: engine.nodeIds.map((node) => ({ node, outcome: "pending", requests: 0 })),
    requests: 0,
    ...(polls > 0 ? { polls } : {}),
  };
  const lock = new Lock({
    resources,
    keys,
    token: passed.token,
    ttlMs,
    startedAt: passed.sentAt,
    deadline: passed.deadline,
    options,
    report,
    operations,
    acquireFan: passed.acquireFan,
    gateHeld: false,
  });
  const confirmed = passed.sentAt + ttlMs - driftMs(ttlMs, options.driftFactor);
  let yes = 0;
  let no = 0;
  const count = engine.nodes.length;
  const gate = gateIndex(keys, count);
  for (let i = 0; i < count; i++) {
    passed.outcomes(i).then(
      (outcome) => {
        if (outcome === "acquired") {
          if (i === gate) lock.gateConfirmed();
          if (++yes === options.quorum) lock.passedOn(confirmed);
        } else if (outcome === "held" && ++no > count - options.quorum) {
          lock.lose(new LockLostError(`lock on ${resources.join(", ")} is no longer held on a quorum`));
        }
      },
      () => undefined,
    );
  }
  return lock;
}
