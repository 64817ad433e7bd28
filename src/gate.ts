/**
 * Which node is a resource set's gate, the gate's own keys, and one poll of it.
 * @module
 */
import type { Clock } from "./clock.js";
import { NodeError } from "./errors.js";
import type { TaskContext } from "./fanout.js";
import type { NodeOutcomeKind } from "./report.js";
import { gateScript } from "./scripts/gate.js";
import { gateReleaseScript } from "./scripts/gate-release.js";
import { runScript, type Script } from "./scripts/script.js";
import { within } from "./signals.js";
import type { RedisNode } from "./transport.js";

/** What the gate said to one poll. */
export interface GateAnswer {
  /** The lock keys were free, this waiter was first in line, and the gate set them with our token. */
  readonly taken: boolean;
  /** Place in line, 0 for first. */
  readonly rank: number;
  /** Longest PTTL of the lock keys on the gate: -2 when free, -1 for a key without TTL. */
  readonly pttlMs: number;
  /** Predicted milliseconds until the lock frees up, from the gate's record of past holds (at most `pttlMs`). */
  readonly freeInMs: number;
  /**
   * After a take: how long ago the previous holder released through the gate, or -1 when the keys
   * were free without a recorded release (expired, or a gate that restarted empty).
   */
  readonly releasedAgoMs: number;
  /** Average hold from take to release, in ms (0 while unknown). */
  readonly holdMs: number;
  /** This waiter's ticket (its place is kept when a take fails elsewhere). */
  readonly ticket: number;
  /** Average deviation of a hold from `holdMs`, in ms. */
  readonly holdDeviationMs: number;
  /** Average interval between two releases with waiters in line, in ms (0 while unknown): the line's pace. */
  readonly cycleMs: number;
  /** How many releases through the gate it has seen: the line moves when this grows. */
  readonly turns: number;
  /**
   * Within the last 2 s a poll found some of the lock keys held on the gate and others free: a
   * different resource set that shares keys with ours holds them, and its releases never pass
   * through our gate.
   */
  readonly contested: boolean;
  /**
   * After a take: how many takes in a row, this one included, found the keys free with no release
   * through the gate since the take before (placeholders or locks that ran out); 0 otherwise.
   */
  readonly unreleasedTakes: number;
}

/**
 * Poll modes: take the keys when it is our turn (`aim`: the same, within a fan-out aimed at the
 * predicted release), only queue up, or leave the queue.
 */
export type GateMode = "take" | "aim" | "wait" | "leave";

/**
 * The gate of a (sorted) key set: the same node for every client with the same node list, spread
 * over the nodes by a hash of the keys (FNV-1a).
 */
export function gateIndex(keys: readonly string[], nodeCount: number): number {
  let hash = 0x811c9dc5;
  for (const key of keys) {
    for (let i = 0; i < key.length; i++) {
      hash ^= key.charCodeAt(i);
      hash = Math.imul(hash, 0x01000193);
    }
    hash ^= 0x0a;
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % nodeCount;
}

/**
 * The gate's keys for a key set: queue, leases and stats. They live under a reserved prefix so
 * that no lock key collides with them unless a resource is named `edge-redlock:gate:…`; the lock's
 * own keys are part of the name, so a key prefix applies to them too.
 */
export function gateKeys(keys: readonly string[]): [queue: string, leases: string, stats: string] {
  const base = `edge-redlock:gate:${keys.length === 1 ? keys[0] : JSON.stringify(keys)}`;
  return [`${base}:queue`, `${base}:leases`, `${base}:stats`];
}

/** One poll of the gate. Throws a {@link NodeError} for an answer of the wrong shape. */
export async function pollGate(
  node: RedisNode,
  keys: readonly string[],
  request: { waiter: string; mode: GateMode; token: string; ttlMs: number; leaseMs: number; ticket: number },
  context: TaskContext,
): Promise<GateAnswer> {
  const reply = await runScript(
    node,
    gateScript,
    [...keys, ...gateKeys(keys)],
    [
      request.waiter,
      request.mode,
      request.token,
      request.ttlMs,
      Math.ceil(request.leaseMs),
      keys.length,
      request.ticket,
    ],
    context,
  );
  const [taken, rank, pttlMs, freeInMs, holdMs, ticket, holdDeviationMs, cycleMs, turns, contested, unreleased] =
    integers(node, gateScript, reply, 11);
  if ((taken !== 0 && taken !== 1) || rank < -1) throw badReply(node, gateScript, reply);
  return {
    taken: taken === 1,
    rank,
    pttlMs,
    freeInMs: taken === 1 ? 0 : Math.max(0, freeInMs),
    releasedAgoMs: taken === 1 ? freeInMs : -1,
    ticket,
    contested: contested === 1,
    unreleasedTakes: Math.max(0, unreleased),
    ...figures(holdMs, holdDeviationMs, cycleMs, turns),
  };
}

/** What the gate has learned, as both its scripts report it. */
function figures(holdMs: number, holdDeviationMs: number, cycleMs: number, turns: number) {
  return {
    holdMs: Math.max(0, holdMs),
    holdDeviationMs: Math.max(0, holdDeviationMs),
    cycleMs: Math.max(0, cycleMs),
    turns,
  };
}

/** A tuple of `N` numbers. */
type Integers<N extends number, R extends number[] = []> = R["length"] extends N ? R : Integers<N, [...R, number]>;

/** A script's reply as `length` integers, or a {@link NodeError}. */
function integers<N extends number>(node: RedisNode, script: Script, reply: unknown, length: N): Integers<N> {
  if (Array.isArray(reply) && reply.length === length && reply.every((v) => Number.isInteger(v))) {
    return reply as Integers<N>;
  }
  throw badReply(node, script, reply);
}

function badReply(node: RedisNode, script: Script, reply: unknown): NodeError {
  return new NodeError(
    node.id,
    `unexpected reply to ${script.name} from ${node.id}: ${JSON.stringify(reply).slice(0, 80)}`,
  );
}

/** What the gate said to a release. */
export interface GateRelease {
  readonly outcome: NodeOutcomeKind;
  /** Waiters holding a lease, ahead of the place made for us (if one was). */
  readonly waiting: number;
  /** The ticket of the place at the back of the line made for us, 0 when none was. */
  readonly ticket: number;
  readonly holdMs: number;
  readonly holdDeviationMs: number;
  readonly cycleMs: number;
  readonly turns: number;
}

/** What a release tells the gate about the hold it ends, from which the gate learns how long holds last. */
export interface EndedHold {
  /** The TTL the keys were last set with (acquired or extended), 0 when unknown. */
  readonly ttlMs: number;
  /** The lock's `gateLeadMs`: how long the gate was ours before the grant's round trip. */
  readonly gateLeadMs: number;
}

/**
 * Release on the gate node (compare-and-DEL) and learn how many waiters are in line; `hold` tells
 * the gate how long the hold lasted. With `requeue`, a client that expects to come back for the
 * lock gets a place at the back of the line in the same request, when others are waiting. Throws
 * a {@link NodeError} for an answer of the wrong shape.
 */
export async function releaseOnGate(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  hold: EndedHold,
  context: TaskContext,
  requeue?: { waiter: string; leaseMs: number },
): Promise<GateRelease> {
  const reply = await runScript(
    node,
    gateReleaseScript,
    [...keys, ...gateKeys(keys)],
    [token, keys.length, hold.ttlMs, requeue?.waiter ?? "", Math.ceil(requeue?.leaseMs ?? 0), hold.gateLeadMs],
    context,
  );
  const [deleted, waiting, ticket, holdMs, holdDeviationMs, cycleMs, turns] = integers(
    node,
    gateReleaseScript,
    reply,
    7,
  );
  if (deleted < 0 || deleted > keys.length || waiting < 0) throw badReply(node, gateReleaseScript, reply);
  return {
    outcome: deleted > 0 ? "released" : "not-held",
    waiting,
    ticket: Math.max(0, ticket),
    ...figures(holdMs, holdDeviationMs, cycleMs, turns),
  };
}

/** A place at the back of a line, made by this client's release (see `releaseOnGate`). */
export interface Place {
  readonly waiter: string;
  readonly ticket: number;
  /** Clock reading at the release. */
  readonly at: number;
  /** The gate's answer as of the release: our rank, the lock free, the gate's figures. */
  readonly answer: GateAnswer;
  /** The release's round trip to the gate, in ms. */
  readonly rttMs: number;
  readonly leaseMs: number;
}

/** The key under which a client remembers a resource set (see {@link HotResources}). */
export function hotKeyOf(keys: readonly string[]): string {
  return keys.join("\n");
}

/** Shortest margin between a release from this isolate and the take of the waiter it woke, in ms (timers fire late by about this much). */
const MIN_WAKE_MARGIN_MS = 2;

/** The prefix of an acquisition's entry among the busy keys (a held lock's entry is its token). */
export const ACQUIRING = "acquiring:";
/** The prefix of a plain fan-out's entry among the busy keys, while its request to the gate node is out. */
export const RACING = "racing:";

/** What an isolate is doing with a resource set right now (see {@link HotResources.busyWith}). */
export type Busy = "racing" | "acquiring" | "holding";

/**
 * Resource sets that clients in this isolate recently had to wait for, or are acquiring or holding
 * right now, by gate key: the next acquisition of such a resource queues up at once instead of
 * racing the waiters (or its siblings) with a fan-out. Shared by every client of the same nodes
 * and clock (see {@link hotResourcesFor}).
 */
export class HotResources {
  readonly #until = new Map<string, number>();
  readonly #places = new Map<string, { place: Promise<Place | undefined>; answerBy: number }>();
  /** Fan-outs on their way, acquisitions in progress and locks held, by gate key: id → until when at most. */
  readonly #busy = new Map<string, Map<string, number>>();
  /** How long after a release of a key from this isolate its woken first in line sends its take (see {@link wakeMarginMs}). */
  readonly #wakeMargins = new Map<string, number>();
  /** Waiters for the next release of a key from this isolate (see {@link nextRelease}). */
  readonly #releases = new Map<string, { promise: Promise<number>; resolve: (at: number) => void }>();

  /**
   * What this isolate is doing with `key` right now, the first that applies: a plain fan-out's
   * `SET NX` may still be on its way to the gate node (`"racing"`), an acquisition is in progress
   * (`"acquiring"`), a lock is held (`"holding"`). The next acquisition then queues up at once,
   * instead of fanning out against its own sibling.
   */
  busyWith(key: string, now: number): Busy | undefined {
    const entries = this.#busy.get(key);
    if (entries === undefined) return undefined;
    let busy: Busy | undefined;
    for (const [id, until] of entries) {
      if (until <= now) entries.delete(id);
      else if (id.startsWith(RACING)) busy = "racing";
      else if (id.startsWith(ACQUIRING)) busy = busy === "racing" ? busy : "acquiring";
      else busy ??= "holding";
    }
    if (entries.size === 0) this.#busy.delete(key);
    return busy;
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

  /** Count `id` (an acquisition, or a lock's token) as busy with `key` until it leaves, or `until` at most. */
  occupy(key: string, id: string, until: number): void {
    if (this.#busy.size > 1024) this.#busy.clear();
    const entries = this.#busy.get(key) ?? new Map<string, number>();
    this.#busy.set(key, entries);
    entries.set(id, until);
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
