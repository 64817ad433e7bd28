/**
 * What an isolate knows of its resources' contention, shared by every client in it with the same
 * nodes: which keys are hot, busy (a fan-out on its way, an acquisition, a held lock), the places
 * in line that releases kept, and the releases its waiters wait for. Internal.
 * @module
 */
import type { Clock } from "./clock.js";
import type { Place } from "./gate.js";
import { within } from "./signals.js";
import type { RedisNode } from "./transport.js";

/** Shortest margin between a release from this isolate and the take of the waiter it woke, in ms (timers fire late by about this much). */
const MIN_WAKE_MARGIN_MS = 2;

/**
 * Resource sets that clients in this isolate recently had to wait for, or are acquiring or holding
 * right now, by gate key: the next acquisition of such a resource queues up at once instead of
 * racing the waiters (or its siblings) with a fan-out. Shared by every client of the same nodes
 * and clock (see {@link hotResourcesFor}).
 */
export class HotResources {
  readonly #until = new Map<string, number>();
  readonly #places = new Map<string, { place: Promise<Place | undefined>; answerBy: number }>();
  /**
   * Acquisitions in progress, locks held, and plain fan-outs whose request to the gate node is
   * still out (`racing`), by gate key: id → until when at most.
   */
  readonly #busy = new Map<string, Map<string, { until: number; racing: boolean }>>();
  /** How long after a release of a key from this isolate its woken first in line sends its take (see {@link wakeMarginMs}). */
  readonly #wakeMargins = new Map<string, number>();
  /** Waiters for the next release of a key from this isolate (see {@link nextRelease}). */
  readonly #releases = new Map<string, { promise: Promise<number>; resolve: (at: number) => void }>();

  /**
   * Whether an acquisition in this isolate is acquiring or holding `key` right now: the next
   * acquisition then queues up at once, instead of fanning out against its own sibling.
   */
  isBusy(key: string, now: number): boolean {
    return this.#live(key, now) !== undefined;
  }

  /**
   * Whether a plain fan-out for `key` from this isolate may still have its `SET NX` on the way to
   * the gate node: a poll that took the gate first would split the nodes with it.
   */
  isRacing(key: string, now: number): boolean {
    for (const entry of this.#live(key, now)?.values() ?? []) if (entry.racing) return true;
    return false;
  }

  /** The entries of `key` that have not run out, or nothing. */
  #live(key: string, now: number): Map<string, { until: number; racing: boolean }> | undefined {
    const entries = this.#busy.get(key);
    if (entries === undefined) return undefined;
    for (const [id, entry] of entries) if (entry.until <= now) entries.delete(id);
    if (entries.size > 0) return entries;
    this.#busy.delete(key);
    return undefined;
  }

  /**
   * Resolves with the clock reading at which a release of `key` from this isolate sent its
   * requests, at the next such release.
   */
  nextRelease(key: string): Promise<number> {
    let waiting = this.#releases.get(key);
    if (waiting === undefined) {
      if (this.#releases.size > 1024) this.#releases.clear();
      let resolve: (at: number) => void = () => {};
      const promise = new Promise<number>((r) => (resolve = r));
      waiting = { promise, resolve };
      this.#releases.set(key, waiting);
    }
    return waiting.promise;
  }

  /** A release of `key` sent its requests at `at` (see {@link nextRelease}). */
  releasing(key: string, at: number): void {
    const waiting = this.#releases.get(key);
    if (waiting === undefined) return;
    this.#releases.delete(key);
    waiting.resolve(at);
  }

  /**
   * How long after a release of `key` from this isolate has sent its requests the first in line,
   * woken by it, sends its take, in ms. Learned from how those takes fared (see
   * {@link noteWokenTake}): the take must reach the nodes after the release, and only a way there
   * that reorders requests (jitter) needs more than a timer's lateness.
   */
  wakeMarginMs(key: string): number {
    return this.#wakeMargins.get(key) ?? MIN_WAKE_MARGIN_MS;
  }

  /**
   * A woken take came before the release at some node (`early`), or took the lock. An early one
   * adds 4 ms to the margin (up to `capMs`), a good one takes off 0.5 ms: the margin settles
   * where about one take in nine comes early, which costs a take of N requests each.
   */
  noteWokenTake(key: string, early: boolean, capMs: number): void {
    const margin = this.wakeMarginMs(key);
    const next = early
      ? Math.min(margin + 4, Math.max(capMs, MIN_WAKE_MARGIN_MS))
      : Math.max(margin - 0.5, MIN_WAKE_MARGIN_MS);
    if (this.#wakeMargins.size > 1024) this.#wakeMargins.clear();
    this.#wakeMargins.set(key, next);
  }

  /**
   * Count `id` (an acquisition, a lock's token, or a plain fan-out that is `racing` for the gate)
   * as busy with `key` until it leaves, or `until` at most.
   */
  occupy(key: string, id: string, until: number, racing = false): void {
    if (this.#busy.size > 1024) this.#busy.clear();
    const entries = this.#busy.get(key) ?? new Map<string, { until: number; racing: boolean }>();
    this.#busy.set(key, entries);
    entries.set(id, { until, racing });
  }

  leave(key: string, id: string): void {
    const entries = this.#busy.get(key);
    if (entries?.delete(id) && entries.size === 0) this.#busy.delete(key);
  }

  /**
   * Keep the place in line that a release is asking for, for this client's next acquisition of
   * the key. A promise: the release settles at a quorum, maybe before the gate has answered.
   * `answerBy`: the clock reading by which the gate's answer comes or never will (the release's
   * deadline).
   */
  keepPlace(key: string, place: Promise<Place | undefined>, answerBy: number): void {
    if (this.#places.size > 1024) this.#places.clear();
    this.#places.set(key, { place, answerBy });
  }

  /**
   * The place kept for `key`, once, if its lease still has a poll interval or more to run. Waits
   * for the release's answer until its deadline at most, on a timer of its own: the release may
   * belong to another request, whose I/O on Workers is cancelled when that request ends, so that
   * its answer never comes. Rejects if `signal` aborts first.
   */
  async takePlace(key: string, clock: { now(): number }, signal?: AbortSignal): Promise<Place | undefined> {
    const kept = this.#places.get(key);
    if (kept === undefined) return undefined;
    this.#places.delete(key);
    const place = await within(kept.place, kept.answerBy - clock.now(), signal);
    return place !== undefined && clock.now() < place.at + place.leaseMs - 100 ? place : undefined;
  }

  isHot(key: string, now: number): boolean {
    const until = this.#until.get(key);
    if (until === undefined) return false;
    if (until > now) return true;
    this.#until.delete(key);
    return false;
  }

  mark(key: string, now: number, forMs: number): void {
    if (this.#until.size > 1024) this.#until.clear();
    this.#until.set(key, now + forMs);
  }
}

/** The isolate's hot resources, by clock (their readings are only comparable on one clock) and node list. */
const hotByClock = new WeakMap<Clock, Map<string, HotResources>>();
const MAX_NODE_LISTS = 64;

/**
 * The hot resources of every client in this isolate with the same nodes (in the same order: the
 * order picks the gate) and clock. On Workers a client is often made per request, from the
 * request's `env`: a client of its own would start every request blind, and concurrent requests
 * for one key would fan out against each other before queueing up.
 * @param nodeIdentities one per node, equal for two nodes only when they are one server (see {@link nodeIdentity}).
 */
export function hotResourcesFor(clock: Clock, nodeIdentities: readonly string[]): HotResources {
  let byNodes = hotByClock.get(clock);
  if (byNodes === undefined) {
    byNodes = new Map();
    hotByClock.set(clock, byNodes);
  }
  const list = nodeIdentities.join("\n");
  let hot = byNodes.get(list);
  if (hot === undefined) {
    if (byNodes.size >= MAX_NODE_LISTS) byNodes.clear();
    hot = new HotResources();
    byNodes.set(list, hot);
  }
  return hot;
}

const objectNumbers = new WeakMap<object, number>();
let objectsNumbered = 0;

function numberOf(object: object): number {
  let n = objectNumbers.get(object);
  if (n === undefined) {
    n = ++objectsNumbered;
    objectNumbers.set(object, n);
  }
  return n;
}

/**
 * When two nodes are one server, for sharing hot resources: a node made from `{ url, token }` by
 * its id (the URL without credentials) and the `fetch` it was given, if any (a custom one may
 * route anywhere); a `RedisNode` passed in only as the same object (its id need not name a server).
 * @param config what the client was given for the node: the node itself, or its REST config.
 */
export function nodeIdentity(node: RedisNode, config: object): string {
  if (config === node) return `object ${numberOf(node)}`;
  const custom = (config as { fetch?: unknown }).fetch;
  return typeof custom === "function" ? `rest ${node.id} fetch ${numberOf(custom)}` : `rest ${node.id}`;
}
