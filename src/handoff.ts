/**
 * Handing a lock over from its release to the next waiter of the same isolate.
 *
 * The first in line of an isolate that holds the lock need not wait for the release and then
 * take the lock in a round trip of its own: it offers its token to the isolate's hot resources,
 * and the release that frees the lock takes the offer up. The release's requests then set the
 * next holder's keys where they delete the releasing holder's (`scripts/hand-over.ts`, and the
 * gate's release script on the gate node): one fan-out of N requests instead of two, a round trip
 * sooner, and never a take that reaches a node before the release.
 *
 * Safety is the acquire's own: the next holder counts a node only where its keys were set, needs
 * a quorum, and counts its validity from before the release's requests were sent, as if it had
 * sent `SET NX` itself then. A node where the keys were someone else's sets nothing.
 *
 * A release can do better still, when the lock it ends has most of a TTL left: it passes the lock
 * itself on, and the next holder holds it at once, with no round trip at all (a hot key's cycle
 * is then its critical section alone). The keys keep the releasing holder's token, and the
 * release's requests set them again, for the next holder's TTL, wherever they still hold it
 * (`scripts/extend.ts`, and the gate's release script, which also takes the waiter out of its
 * line). The next holder claims no more than the releasing holder could (its deadline), nor more
 * than its own TTL from the send: every node of the quorum that granted the lock holds the token
 * until then, whether the requests reach it or not, as no request of a pass-on ever deletes a key.
 * Once a quorum has answered that it set the keys again, the deadline is the one an acquisition
 * sent at the release would have. A release passes the lock on only to a waiter that counts the
 * same quorum, asks for a TTL no longer than the keys were set with (so that a late extension of
 * the releasing holder cannot cut a node's TTL below the claim), and gets at least
 * {@link PASS_ON_MIN_SHARE} of its validity at once; a fenced lock is never passed on.
 * @module
 */
import type { Lock } from "./lock.js";
import type { AcquireFan } from "./operations/cleanup.js";
import type { NodeOutcomeKind } from "./report.js";

/**
 * The least share of its validity (TTL less drift) that a waiter takes a lock passed on with:
 * a lock whose holder kept it for longer than a tenth of the TTL is handed over with fresh keys.
 */
export const PASS_ON_MIN_SHARE = 0.9;

/** A lock passed on by its release (see the module's comment). */
export interface PassedOn {
  /** The releasing holder's token: the keys keep it. */
  readonly token: string;
  /** What the next holder may claim at once (clock reading). */
  readonly deadline: number;
  /** Clock reading before the release's requests were sent. */
  readonly sentAt: number;
  /** The acquisition that first set the token: the last release of the lock cleans up after it. */
  readonly acquireFan: AcquireFan;
  /** What node i's request did for the next holder: `acquired` where it set the keys again. */
  readonly outcomes: (index: number) => Promise<NodeOutcomeKind>;
}

/** A waiter's offer to take the lock over in the next release of it from its isolate. */
export interface HandoffOffer {
  /** The next holder's token. */
  readonly token: string;
  /** The next holder's TTL, in ms. */
  readonly ttlMs: number;
  /** The waiter's id in the gate's line: the gate hands over only to its first in line. */
  readonly waiter: string;
  /**
   * Called once by the release that takes the offer up, as it sends its requests: `outcomes(i)`
   * settles with what node i's request meant for the next holder (`acquired` or `held`, or the
   * request's failure), and validity counts from `sentAt`.
   */
  accept(outcomes: (index: number) => Promise<NodeOutcomeKind>, sentAt: number): void;
  /** The quorum the waiter counts. */
  readonly quorum: number;
  /** The waiter's validity for its TTL (TTL less drift), in ms. */
  readonly validityMs: number;
  /** Called once, instead of `accept`, by a release that passes its lock on. */
  takeOver(passed: PassedOn): void;
}

/**
 * What `lock`, released at `sentAt`, may claim at once when passed on to `offer`, or `undefined`
 * when it is not to be passed on (see the module's comment): a lock that may have been lost, a
 * fenced one (its grant is a fence token's), or one whose gate (at `gate`) is not known to hold
 * its token never is.
 */
export function passOnDeadline(offer: HandoffOffer, lock: Lock, gate: number, sentAt: number): number | undefined {
  if (lock.fence !== undefined || lock.lost || !lock.holdsGate(gate)) return undefined;
  if (offer.quorum !== lock.options.quorum || offer.ttlMs > lock.lastTtlMs) return undefined;
  const claimMs = Math.min(lock.remainingMs(), offer.validityMs);
  return claimMs >= PASS_ON_MIN_SHARE * offer.validityMs ? sentAt + claimMs : undefined;
}

/**
 * A release that hands the lock over: the offer it took up, and per node what its requests mean
 * for the next holder.
 */
export class HandoffOutcomes {
  readonly offer: HandoffOffer;
  readonly #settle: ((outcome: Promise<NodeOutcomeKind>) => void)[] = [];
  readonly #outcomes: Promise<NodeOutcomeKind>[] = [];

  constructor(offer: HandoffOffer, nodeCount: number) {
    this.offer = offer;
    for (let i = 0; i < nodeCount; i++) {
      this.#outcomes.push(new Promise((resolve) => this.#settle.push(resolve)));
    }
  }

  /** What node `index`'s request means for the next holder, once it is known. */
  readonly outcome = (index: number): Promise<NodeOutcomeKind> => this.#outcomes[index] as Promise<NodeOutcomeKind>;

  /**
   * Pass node `index`'s request through: `taken(reply)` says whether the next holder now holds
   * its keys there; a failed request fails for both holders.
   */
  route<T>(index: number, request: Promise<T>, taken: (reply: T) => boolean): Promise<T> {
    const settle = this.#settle[index] as (outcome: Promise<NodeOutcomeKind>) => void;
    settle(request.then((reply) => (taken(reply) ? "acquired" : "held")));
    return request;
  }
}
