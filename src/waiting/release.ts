/**
 * The part waiting in line plays in a release (see `core/waiting.ts`): the gate node gets the
 * gate's release script instead of the plain compare-and-`DEL`, and when the first in line of this
 * isolate offered to take the lock over, every node's request hands it over (see
 * `isolate/handoff.ts`).
 * @module
 */
import type { NodeOutcome, NodeOutcomeKind } from "../base/report.js";
import { sleep } from "../base/signals.js";
import type { Engine } from "../core/engine.js";
import type { FanOut, TaskContext } from "../core/fanout.js";
import { isFailure } from "../core/quorum.js";
import { randomToken } from "../core/token.js";
import type { ReleasePart, ReleaseRequest } from "../core/waiting.js";
import { type HandoffOffer, HandoffOutcomes } from "../isolate/handoff.js";
import type { HotResources } from "../isolate/hot-resources.js";
import { noteRoundTrips } from "./attempts.js";
import {
  type EndedHold,
  type GateRelease,
  gateIndex,
  handOverOnNode,
  hotKeyOf,
  type Place,
  releaseOnGate,
} from "./gate.js";
import { averageHold, gateReleaseDelay } from "./pacing.js";

/** How long a resource counts as contended after a release found waiters in line, in ms. */
const HOT_AFTER_RELEASE_MS = 2000;

/**
 * The gate's part in the release of `request.keys`. The gate node also says how many wait in
 * line: this client's next acquisition of the same resource then queues up behind them instead of
 * jumping the line. A client that waited for this resource recently is likely to come back for
 * it: its release takes a place at the back of the line in the same request, which saves that
 * acquisition its first poll.
 */
export function releaseInLine(engine: Engine, hot: HotResources, request: ReleaseRequest): ReleasePart {
  return new GateReleasePart(engine, hot, request);
}

/**
 * One release's gate part: an object with methods rather than closures over the release's
 * variables, because every release makes one (a closure per method and per callback cost the
 * client measurably more).
 */
class GateReleasePart implements ReleasePart {
  readonly engine: Engine;
  readonly hot: HotResources;
  readonly request: ReleaseRequest;
  readonly hotKey: string;
  readonly gate: number;
  /** What the gate learns of the hold that ends (see `EndedHold`). */
  readonly hold: EndedHold;
  /** The place at the back of the line asked for, when the resource is hot. */
  readonly requeue: { waiter: string; leaseMs: number } | undefined;
  readonly handoff: HandoffOutcomes | undefined;
  /** The hand-over's take for the next holder, with how long this isolate's holds last. */
  readonly next: (HandoffOffer & { expectMs: number }) | undefined;
  /** How long the gate's part waits before it is sent (see `pacing.gateReleaseDelay`), in ms. */
  readonly gateDelayMs: number;
  /** Also the release's send time until it is sent (`sent` is told before any answer is read). */
  sentAt: number;
  /** Tells the isolate the place kept for this client's next acquisition, or that there is none. */
  keep: (place: Place | undefined) => void = ignorePlace;

  constructor(engine: Engine, hot: HotResources, request: ReleaseRequest) {
    const { options: o, keys, lock } = request;
    this.engine = engine;
    this.hot = hot;
    this.request = request;
    const hotKey = hotKeyOf(keys);
    this.hotKey = hotKey;
    if (lock) hot.leave(hotKey, lock.token);
    this.gate = gateIndex(keys, engine.nodes.length);
    // The TTL the keys were last set with, and how long before the grant the gate was ours (0 for
    // a release by token: unknown).
    this.hold = { ttlMs: lock?.lastTtlMs ?? 0, gateLeadMs: lock?.gateLeadMs ?? 0 };
    const sentAt = o.clock.now();
    this.sentAt = sentAt;
    this.requeue = hot.isHot(hotKey, sentAt) ? { waiter: randomToken(), leaseMs: HOT_AFTER_RELEASE_MS } : undefined;
    if (this.requeue) {
      hot.keepPlace(hotKey, new Promise((resolve) => (this.keep = resolve)), sentAt + o.requestTimeoutMs);
    }
    const offer = hot.claimHandoff(hotKey, keys);
    this.handoff = offer && new HandoffOutcomes(offer, engine.nodes.length);
    // The gate's take for the next holder tells it how long this isolate's holds last, as its own would.
    this.next = offer && { ...offer, expectMs: hot.holdOf(hotKey) };
    // The gate frees the lock no sooner than a quorum of nodes (see `pacing.gateReleaseDelay`);
    // never when the release hands the lock over, whose next holder counts the gate like any node.
    // The delay is under a one-way time to the quorum, and release() resolves on the quorum's
    // answers, a round trip: the gate's part has left by then (checked in geo.test.ts), so a
    // Worker that answers right after `await lock.release()` does not end before it is sent.
    this.gateDelayMs =
      this.requeue === undefined || this.handoff
        ? 0
        : gateReleaseDelay(hot.nodeRtts(), engine.nodes.length, this.gate, o.quorum, o.requestTimeoutMs / 4);
  }

  task(i: number, context: TaskContext): Promise<NodeOutcomeKind> | undefined {
    const { engine, handoff } = this;
    const { keys, token } = this.request;
    if (i === this.gate) return this.#onGate(context);
    if (!handoff) return undefined;
    const sending = handOverOnNode(engine.node(i), keys, token, handoff.offer, context);
    return handoff.route(i, sending, (r) => r.taken).then((r) => (r.released ? "released" : "not-held"));
  }

  sent(at: number): void {
    this.sentAt = at;
    // The requests are on their way: the next holder's attempt counts from before they were sent.
    this.handoff?.offer.accept(this.handoff.outcome, at);
  }

  decided(outcomes: readonly { readonly outcome: NodeOutcomeKind }[], fan: FanOut): void {
    resendToGate(this.engine, this.request, this.hold, this.gate, outcomes, fan);
    const { hot, gate, gateDelayMs } = this;
    if (this.requeue) void fan.outcomes.then((final) => noteRoundTrips(hot, final, gateDelayMs > 0 ? gate : -1));
  }

  #onGate(context: TaskContext): Promise<NodeOutcomeKind> {
    if (this.gateDelayMs > 0) return sleep(this.gateDelayMs, context.signal).then(() => this.#sendToGate(context));
    return this.#sendToGate(context);
  }

  #sendToGate(context: TaskContext): Promise<NodeOutcomeKind> {
    const { engine, gate, hold, requeue, next, handoff } = this;
    const { keys, token } = this.request;
    const sending = releaseOnGate(engine.node(gate), keys, token, hold, context, requeue, next);
    return (handoff ? handoff.route(gate, sending, (r) => r.handedOver) : sending).then(
      (answer) => this.#learn(answer),
      (error: unknown) => {
        this.keep(undefined);
        throw error;
      },
    );
  }

  /** What the gate's answer tells this isolate about the line. */
  #learn(answer: GateRelease): NodeOutcomeKind {
    const { hot, hotKey, requeue } = this;
    const now = this.request.options.clock.now();
    if (answer.heldMs > 0) hot.setHold(hotKey, averageHold(hot.holdOf(hotKey), answer.heldMs));
    if (answer.waiting > 0 || answer.handedOver) hot.mark(hotKey, now, HOT_AFTER_RELEASE_MS);
    // The first in line now, if it waits in this isolate, learns it without a poll.
    if (answer.headTicket > 0) hot.turnOf(hotKey, answer.headTicket, answer.handedOver ? "first" : "free");
    this.keep(requeue && answer.ticket > 0 ? placeOf(requeue, answer, now, now - this.sentAt) : undefined);
    return answer.outcome;
  }
}

function ignorePlace(): void {}

/**
 * A gate that missed the release would keep the key until its TTL runs out, and its line would
 * wait for it as for a holder that died while the other nodes are free: a release the gate failed
 * or did not answer in time is sent to it once more, so that a dropped request costs a request,
 * not the TTL. (Deadline: two request deadlines and a margin for the timers' delay.)
 */
function resendToGate(
  engine: Engine,
  request: ReleaseRequest,
  hold: { ttlMs: number; gateLeadMs: number },
  gate: number,
  outcomes: readonly { readonly outcome: NodeOutcome["outcome"] }[],
  fan: FanOut,
): void {
  const { options: o, resources, keys, token } = request;
  const gateOutcome = (outcomes[gate] as { outcome: NodeOutcome["outcome"] }).outcome;
  if (!isFailure(gateOutcome) && gateOutcome !== "pending") return;
  // A gate that was still answering at the decision has often answered since: when it released,
  // there is nothing to send again and nothing to track.
  const known = fan.knownOutcome(gate);
  if (known !== undefined && !isFailure(known.outcome)) return;
  // As a fan-out to the gate alone: the same deadline, abort and hooks as every request.
  const again = () =>
    engine.fan(
      o,
      "release",
      resources,
      {
        yes: "released",
        task: async (i, context) => (await releaseOnGate(engine.node(i), keys, token, hold, context)).outcome,
      },
      o.requestTimeoutMs,
      [gate],
    ).outcomes;
  const settled = fan.outcomes.then((final) => (isFailure((final[gate] as NodeOutcome).outcome) ? again() : undefined));
  engine.background.track(settled, 2 * o.requestTimeoutMs + 1000);
}

/** The place a release kept at the back of the line, as a poll from there would have described it. */
function placeOf(requeue: { waiter: string; leaseMs: number }, answer: GateRelease, at: number, rttMs: number): Place {
  return {
    waiter: requeue.waiter,
    ticket: answer.ticket,
    at,
    rttMs,
    leaseMs: requeue.leaseMs,
    answer: {
      taken: false,
      rank: answer.waiting,
      // The lock is free at this moment: the first in line is about to take it.
      pttlMs: -2,
      freeInMs: 0,
      releasedAgoMs: -1,
      holdMs: answer.holdMs,
      ticket: answer.ticket,
      holdDeviationMs: answer.holdDeviationMs,
      cycleMs: answer.cycleMs,
      turns: answer.turns,
      contested: false,
      unreleasedTakes: 0,
    },
  };
}
