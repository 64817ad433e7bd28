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
 * The next holder has its own token, set by the release in the same per-node step that deletes
 * the releasing holder's: nothing sent later with the old token (a second release, a late
 * extension, a release or extension by token from anywhere) can touch the next holder's keys, and
 * the next holder holds nothing until the answers say where its keys were set.
 * @module
 */
import type { NodeOutcomeKind } from "../base/report.js";

/** A waiter's offer to take the lock over in the next release of it from its isolate. */
export interface HandoffOffer {
  /**
   * The keys the waiter waits for. Offers are kept by the isolate's state of one cluster, by the
   * name of the key set; a release takes up only an offer for exactly its keys.
   */
  readonly keys: readonly string[];
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
