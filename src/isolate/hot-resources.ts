/**
 * What an isolate knows of its resources' contention, shared by every client in it with the same
 * nodes: which keys are hot, busy (a fan-out on its way, an acquisition, a held lock), the places
 * in line that releases kept, and its first in line's offers to take a lock over from its release.
 * Internal.
 * @module
 */
import type { Clock } from "../base/clock.js";
import { within } from "../base/signals.js";
import type { HandoffOffer } from "./handoff.js";

/** First polls of one key's line in flight at once from an isolate (see `HotResources.joinSlot`). */
const MAX_JOINS = 2;
/**
 * How long past its poll's deadline a join's slot lasts: the poll's own timeout, which gives the
 * slot back as "the gate did not answer" and lets every waiting caller do without the gate,
 * comes first. A slot that ran out at the deadline itself went to the next callers in line,
 * whose polls of the hung gate then waited another deadline.
 */
const JOIN_GRACE_MS = 20;

/** The joins of one key's line in flight from an isolate (see `HotResources.joinSlot`). */
interface Joins {
  /** When each slot taken runs out at the latest. */
  until: number[];
  /** Callers waiting for a slot, first come first. */
  waiting: (() => void)[];
  /** Until then a join's poll failed (the gate is down or slow): callers join without a slot. */
  bypassUntil: number;
}

/**
 * A place in a line kept for a client's next acquisition (see {@link HotResources.keepPlace}):
 * what the isolate needs to know of it, whatever else the waiting strategy keeps in it.
 */
export interface KeptPlace {
  /** Clock reading when the place was made. */
  readonly at: number;
  /** How long the place lasts from then, in ms. */
  readonly leaseMs: number;
}

/** How a waiter learns its turn from a release in its isolate (see `HotResources.listenForTurn`). */
export type Turn = "first" | "free";

/** What keeps a resource busy in an isolate (`id`: see {@link HotResources.occupy}), and until when at most. */
interface Busy {
  readonly id: string;
  readonly until: number;
  readonly kind: "acquiring" | "holding" | "racing";
}

/**
 * Resource sets that clients in this isolate recently had to wait for, or are acquiring or holding
 * right now, by gate key: the next acquisition of such a resource queues up at once instead of
 * racing the waiters (or its siblings) with a fan-out. Shared by every client of the same nodes
 * and clock (see {@link hotResourcesFor}).
 */
export class HotResources {
  readonly #until = new Map<string, number>();
  readonly #places = new Map<string, { place: Promise<KeptPlace | undefined>; answerBy: number }>();
  /**
   * Acquisitions in progress, locks held, and plain fan-outs racing for the gate, by gate key, at
   * most one entry per id. A short array, not a map of ids: every acquire + release adds and
   * removes entries, and a small map is rebuilt as it empties.
   */
  readonly #busy = new Map<string, Busy[]>();
  /** The first in line's offer to take the lock over from its release, by gate key (see `handoff.ts`). */
  readonly #offers = new Map<string, HandoffOffer>();
  /** Joins of a line in flight from this isolate, and the callers waiting to join, by gate key (see {@link joinSlot}). */
  readonly #joins = new Map<string, Joins>();
  /**
   * Waiters standing in line from this isolate, by gate key and ticket: how to tell one that is
   * listening its turn, or the turn told while it was not (see {@link listenForTurn}).
   */
  readonly #turns = new Map<string, { tell?: ((turn: Turn) => void) | undefined; told?: Turn | undefined }>();
  /** How long this isolate's holds of each key last, as the gate measured them (see {@link holdOf}). */
  readonly #holds = new Map<string, number>();
  /** Each node's round trip from this isolate, by node index (see {@link nodeRtts}). */
  readonly #nodeRtts: number[] = [];

  /**
   * Each node's round trip from this isolate, in ms, by node index (0, or missing, while unknown),
   * as waiting averaged it from answers: where the nodes stand from this isolate decides when a
   * release's part for the gate and the parts of a take are sent (see `waiting/pacing.ts`).
   */
  nodeRtts(): readonly number[] {
    return this.#nodeRtts;
  }

  /** Records `ms` as node `index`'s round trip from this isolate (see {@link nodeRtts}; the caller averages). */
  setNodeRtt(index: number, ms: number): void {
    this.#nodeRtts[index] = ms;
  }

  /**
   * How long this isolate's holds of `key` last, as the gate measured them, in ms (0 while
   * unknown): its takes tell the gate, which predicts the release of this isolate's holds by it
   * instead of by the average of the whole line's.
   */
  holdOf(key: string): number {
    return this.#holds.get(key) ?? 0;
  }

  /** Records `ms` as this isolate's hold of `key` (see {@link holdOf}; the caller averages). */
  setHold(key: string, ms: number): void {
    if (this.#holds.size > 1024 && !this.#holds.has(key)) this.#holds.clear();
    this.#holds.set(key, ms);
  }

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
    const entries = this.#live(key, now);
    if (entries !== undefined) for (const entry of entries) if (entry.kind === "racing") return true;
    return false;
  }

  /**
   * How long a lock of `key` held in this isolate has left until its deadline, in ms (0 when none
   * is): its release will hand it over (see `handoff.ts`).
   */
  heldHereFor(key: string, now: number): number {
    let longest = 0;
    const entries = this.#live(key, now);
    if (entries !== undefined)
      for (const entry of entries) if (entry.kind === "holding") longest = Math.max(longest, entry.until - now);
    return longest;
  }

  /** The entries of `key` that have not run out, or nothing. */
  #live(key: string, now: number): readonly Busy[] | undefined {
    const entries = this.#busy.get(key);
    if (entries === undefined) return undefined;
    for (let i = entries.length - 1; i >= 0; i--) if ((entries[i] as Busy).until <= now) removeAt(entries, i);
    if (entries.length > 0) return entries;
    this.#busy.delete(key);
    return undefined;
  }

  /** `offer` stands until a release of `key` from this isolate takes it up, or it is withdrawn. */
  offerHandoff(key: string, offer: HandoffOffer): void {
    if (this.#offers.size > 1024) this.#offers.clear();
    this.#offers.set(key, offer);
  }

  withdrawHandoff(key: string, offer: HandoffOffer): void {
    if (this.#offers.get(key) === offer) this.#offers.delete(key);
  }

  /** The waiter with `ticket` stands in `key`'s line from this isolate, until {@link stopWaiting}. */
  waitHere(key: string, ticket: number): void {
    const id = `${key}\n${ticket}`;
    if (this.#turns.has(id)) return;
    if (this.#turns.size > 1024) this.#turns.clear();
    this.#turns.set(id, {});
  }

  stopWaiting(key: string, ticket: number): void {
    this.#turns.delete(`${key}\n${ticket}`);
  }

  /**
   * Until `stop()`, `turn` resolves when a release of `key` from this isolate learns from the gate
   * that the waiter with `ticket` (see {@link waitHere}) is now first in line: `first` when the
   * release handed the lock over to the waiter ahead of it (its turn is the next release), `free`
   * when the lock is free. A turn told while the waiter was not listening (a poll of its own on the
   * way) resolves at once: it stays first in line until it takes the lock.
   */
  listenForTurn(key: string, ticket: number): { turn: Promise<Turn>; stop(): void } {
    const waiter = this.#turns.get(`${key}\n${ticket}`);
    if (waiter === undefined) return { turn: new Promise(() => {}), stop: () => {} };
    const told = waiter.told;
    if (told !== undefined) {
      waiter.told = undefined;
      return { turn: Promise.resolve(told), stop: () => {} };
    }
    const turn = new Promise<Turn>((resolve) => (waiter.tell = resolve));
    return { turn, stop: () => (waiter.tell = undefined) };
  }

  /** A release of `key` learned that the waiter with `ticket` is first in line (see {@link listenForTurn}). */
  turnOf(key: string, ticket: number, turn: Turn): void {
    const waiter = this.#turns.get(`${key}\n${ticket}`);
    if (waiter === undefined) return;
    const tell = waiter.tell;
    waiter.tell = undefined;
    if (tell !== undefined) tell(turn);
    else waiter.told = turn;
  }

  /**
   * The standing offer for `key`, taken up by the release of `keys` about to send its requests, if
   * there is one for exactly these keys.
   */
  claimHandoff(key: string, keys: readonly string[]): HandoffOffer | undefined {
    const offer = this.#offers.get(key);
    if (offer === undefined || !sameKeys(offer.keys, keys)) return undefined;
    this.#offers.delete(key);
    return offer;
  }

  /**
   * Count `id` (an acquisition, a lock's token, or a plain fan-out whose `SET NX` may still be on
   * its way to the gate node) as busy with `key` until it leaves, or `until` at most.
   */
  occupy(key: string, id: string, until: number, kind: Busy["kind"]): void {
    let entries = this.#busy.get(key);
    if (entries === undefined) {
      if (this.#busy.size > 1024) this.#busy.clear();
      entries = [];
      this.#busy.set(key, entries);
    }
    const entry: Busy = { id, until, kind };
    const index = indexOfId(entries, id);
    if (index < 0) entries.push(entry);
    else entries[index] = entry;
  }

  leave(key: string, id: string): void {
    const entries = this.#busy.get(key);
    if (entries === undefined) return;
    const index = indexOfId(entries, id);
    if (index < 0) return;
    removeAt(entries, index);
    if (entries.length === 0) this.#busy.delete(key);
  }

  /**
   * Keep the place in line that a release is asking for, for this client's next acquisition of
   * the key. A promise: the release settles at a quorum, maybe before the gate has answered.
   * `answerBy`: the clock reading by which the gate's answer comes or never will (the release's
   * deadline).
   */
  keepPlace(key: string, place: Promise<KeptPlace | undefined>, answerBy: number): void {
    if (this.#places.size > 1024) this.#places.clear();
    this.#places.set(key, { place, answerBy });
  }

  /**
   * The place kept for `key`, once, if its lease still has a poll interval or more to run. Waits
   * for the release's answer until its deadline at most, on a timer of its own: the release may
   * belong to another request, whose I/O on Workers is cancelled when that request ends, so that
   * its answer never comes. Rejects if `signal` aborts first.
   */
  async takePlace<P extends KeptPlace>(
    key: string,
    clock: { now(): number },
    signal?: AbortSignal,
  ): Promise<P | undefined> {
    const kept = this.#places.get(key);
    if (kept === undefined) return undefined;
    this.#places.delete(key);
    const place = await within(kept.place, kept.answerBy - clock.now(), signal);
    // The caller reads the places it kept (one strategy keeps them): P is what it put in.
    return place !== undefined && clock.now() < place.at + place.leaseMs - 100 ? (place as P) : undefined;
  }

  /**
   * A place among the isolate's joins of `key`'s line in flight: at most {@link MAX_JOINS} first
   * polls at once, the others wait their turn, first come first served. Callers that arrive together
   * (64 requests for one key in a Node process, in the bench) otherwise polled the gate in the same
   * instant: the gate's answers came back 100–145 ms later instead of one round trip of about 25, and the first holder's work and release waited behind them (a trace at
   * +20 ms per node: the first handoff took 137–155 ms, the next ones 70). A slot is taken for
   * `timeoutMs` at most (the poll's deadline): on Workers the poll of a request that has ended never
   * settles, and its slot must not block the others. Resolves with the function that gives the slot
   * back, told whether the gate answered; `gate-down` when a join's poll found the gate down or slow
   * within the last `timeoutMs` (the caller then does without the gate at once, as its own poll
   * would have told it to a request deadline later). Rejects if `signal` aborts first.
   */
  async joinSlot(
    key: string,
    clock: Clock,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<((answered: boolean) => void) | "gate-down"> {
    let entry = this.#joins.get(key);
    if (entry === undefined) {
      if (this.#joins.size > 1024) this.#joins.clear();
      entry = { until: [], waiting: [], bypassUntil: 0 };
      this.#joins.set(key, entry);
    }
    const joins = entry;
    const take = (): ((answered: boolean) => void) => {
      const until = clock.now() + timeoutMs + JOIN_GRACE_MS;
      joins.until.push(until);
      return (answered) => {
        const index = joins.until.indexOf(until);
        if (index >= 0) joins.until.splice(index, 1);
        if (!answered) {
          // A gate that does not answer must not hold the line up a request deadline per slot:
          // everyone waiting falls back to fan-outs at once, as its own poll would have.
          joins.bypassUntil = clock.now() + timeoutMs;
          for (const wake of joins.waiting.splice(0)) wake();
          return;
        }
        // The slot goes to the caller that has waited longest.
        const next = joins.waiting.shift();
        if (next) next();
        else if (joins.until.length === 0 && this.#joins.get(key) === joins) this.#joins.delete(key);
      };
    };
    let waited = false;
    for (;;) {
      const now = clock.now();
      if (joins.bypassUntil > now) return "gate-down";
      joins.until = joins.until.filter((until) => until > now);
      if (joins.until.length < MAX_JOINS && (waited || joins.waiting.length === 0)) return take();
      let woken = false;
      let wake: () => void = () => {};
      const turn = new Promise<void>((resolve) => {
        wake = () => {
          woken = true;
          resolve();
        };
      });
      joins.waiting.push(wake);
      try {
        // Until a slot is given back to us, or the earliest slot's deadline.
        await within(turn, joins.until.length > 0 ? Math.min(...joins.until) - now : 0, signal);
      } finally {
        const index = joins.waiting.indexOf(wake);
        if (index >= 0) joins.waiting.splice(index, 1);
      }
      if (joins.bypassUntil > clock.now()) return "gate-down";
      if (woken) return take();
      waited = true;
    }
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

function indexOfId(entries: readonly Busy[], id: string): number {
  for (let i = 0; i < entries.length; i++) if ((entries[i] as Busy).id === id) return i;
  return -1;
}

/** Removes entry `index`, moving the last one into its place (the order of entries does not matter). */
function removeAt(entries: Busy[], index: number): void {
  const last = entries.pop() as Busy;
  if (index < entries.length) entries[index] = last;
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((key, i) => key === b[i]);
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
  const list = JSON.stringify(nodeIdentities);
  let hot = byNodes.get(list);
  if (hot === undefined) {
    if (byNodes.size >= MAX_NODE_LISTS) byNodes.clear();
    hot = new HotResources();
    byNodes.set(list, hot);
  }
  return hot;
}
