/**
 * Which node is a resource set's gate, the gate's own keys, and one poll of it.
 * @module
 */
import type { NodeOutcomeKind } from "../base/report.js";
import type { TaskContext } from "../core/fanout.js";
import { keysHash, RESERVED_KEY_PART } from "../core/keys.js";
import { unexpected } from "../core/node-operations.js";
import { runScript, runScriptRead, type Script } from "../core/scripts/script.js";
import type { RedisNode, RedisReply } from "../transport/rest.js";
import { gateScript } from "./scripts/gate.js";
import { gateReleaseScript } from "./scripts/gate-release.js";
import { handOverScript } from "./scripts/hand-over.js";

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
 * Whether a take's `answer` says the previous holder's release may still be on its way to the
 * other nodes, which are then asked again when they say "held": it reached the gate at most a
 * request deadline ago (a release sends to every node at once, each within that deadline).
 * Released longer ago, the other nodes' "held" is another holder's, which no asking again frees.
 */
export function releaseOnItsWay(answer: GateAnswer, requestTimeoutMs: number): boolean {
  return answer.taken && answer.releasedAgoMs >= 0 && answer.releasedAgoMs <= requestTimeoutMs;
}

/**
 * The gate of a (sorted) key set: the same node for every client with the same node list, spread
 * over the nodes by a hash of the keys (`core/keys.keysHash`).
 */
export function gateIndex(keys: readonly string[], nodeCount: number): number {
  // The last list's hash is kept, by its identity as in `hotKeyOf`: an acquisition and its
  // release name the same list.
  if (keys !== hashedKeys) {
    hash = keysHash(keys);
    hashedKeys = keys;
  }
  return hash % nodeCount;
}

let hashedKeys: readonly string[] | undefined;
let hash = 0;

/**
 * The gate's keys for a key set: queue, leases and stats, in the reserved namespace (see
 * `RESERVED_KEY_PART`), which no lock key can reach (a resource whose key would start with it is
 * refused). The set is named by {@link hotKeyOf}: one encoding for every set, a single key's
 * included, that no other set shares.
 */
export function gateKeys(keys: readonly string[]): [queue: string, leases: string, stats: string] {
  const base = `${RESERVED_KEY_PART}gate:${hotKeyOf(keys)}`;
  return [`${base}:queue`, `${base}:leases`, `${base}:stats`];
}

/**
 * The lock keys followed by their gate's keys, as the gate's scripts take them. The last list's
 * are kept, by its identity as in {@link hotKeyOf}: a release names the keys its acquisition
 * named, and this saves building four strings and two arrays per release.
 */
function gateScriptKeys(keys: readonly string[]): readonly string[] {
  if (keys !== scriptKeysOf) {
    scriptKeys = [...keys, ...gateKeys(keys)];
    scriptKeysOf = keys;
  }
  return scriptKeys;
}

let scriptKeysOf: readonly string[] | undefined;
let scriptKeys: readonly string[] = [];

/** One poll of the gate. Throws a {@link NodeError} for an answer of the wrong shape. */
export async function pollGate(
  node: RedisNode,
  keys: readonly string[],
  request: {
    waiter: string;
    mode: GateMode;
    token: string;
    ttlMs: number;
    leaseMs: number;
    ticket: number;
    /** For a take: how long this isolate's holds last, as the gate measured them (0 when unknown). */
    expectMs?: number;
  },
  context: TaskContext,
): Promise<GateAnswer> {
  const reply = await runScript(
    node,
    gateScript,
    gateScriptKeys(keys),
    [
      request.waiter,
      request.mode,
      request.token,
      request.ttlMs,
      Math.ceil(request.leaseMs),
      keys.length,
      request.ticket,
      Math.round(request.expectMs ?? 0),
    ],
    context,
  );
  const [taken, rank, pttlMs, freeInMs, holdMs, ticket, holdDeviationMs, cycleMs, turns, contested, unreleased] =
    integers(node, gateScript, reply, 11);
  if ((taken !== 0 && taken !== 1) || rank < -1) throw unexpected(node, gateScript.name, reply);
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
function integers<N extends number>(node: RedisNode, script: Script, reply: RedisReply, length: N): Integers<N> {
  if (Array.isArray(reply) && reply.length === length) {
    let i = 0;
    while (i < length && Number.isInteger(reply[i])) i++;
    if (i === length) return reply as Integers<N>;
  }
  throw unexpected(node, script.name, reply);
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
  /** The lock keys were handed over to the next holder (see `handoff.ts`). */
  readonly handedOver: boolean;
  /** After a release: the ticket of the waiter now first in line, 0 for none. */
  readonly headTicket: number;
  /** The hold that ended, as the gate measured it and learned from it, in ms (0 when it learned nothing). */
  readonly heldMs: number;
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
 * lock gets a place at the back of the line in the same request, when others are waiting. With
 * `next`, the keys are handed over to that waiter when it is first in line and they are free
 * (see `handoff.ts`). Throws a {@link NodeError} for an answer of the wrong shape.
 */
export function releaseOnGate(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  hold: EndedHold,
  context: TaskContext,
  requeue?: { waiter: string; leaseMs: number },
  next?: { token: string; ttlMs: number; waiter: string; expectMs?: number },
): Promise<GateRelease> {
  return runScriptRead(
    node,
    gateReleaseScript,
    gateScriptKeys(keys),
    [
      token,
      keys.length,
      hold.ttlMs,
      requeue?.waiter ?? "",
      Math.ceil(requeue?.leaseMs ?? 0),
      hold.gateLeadMs,
      next?.token ?? "",
      next?.ttlMs ?? 0,
      next?.waiter ?? "",
      Math.round(next?.expectMs ?? 0),
    ],
    context,
    readGateRelease,
  );
}

/** The gate release script's reply; `scriptKeys` are the lock keys and then the gate's 3. */
function readGateRelease(reply: RedisReply, node: RedisNode, scriptKeys: readonly string[]): GateRelease {
  // Indexed, not destructured: destructuring an array goes through its iterator.
  const answer = integers(node, gateReleaseScript, reply, 10);
  const deleted = answer[0];
  const waiting = answer[1];
  const ticket = answer[2];
  const holdMs = answer[3];
  const holdDeviationMs = answer[4];
  const cycleMs = answer[5];
  const turns = answer[6];
  const handed = answer[7];
  const head = answer[8];
  const held = answer[9];
  const keyCount = scriptKeys.length - 3;
  if (deleted < 0 || deleted > keyCount || waiting < 0 || (handed !== 0 && handed !== 1) || held < 0)
    throw unexpected(node, gateReleaseScript.name, reply);
  return {
    outcome: deleted > 0 ? "released" : "not-held",
    waiting,
    ticket: Math.max(0, ticket),
    handedOver: handed === 1,
    headTicket: Math.max(0, head),
    heldMs: held,
    holdMs: Math.max(0, holdMs),
    holdDeviationMs: Math.max(0, holdDeviationMs),
    cycleMs: Math.max(0, cycleMs),
    turns,
  };
}

/**
 * Compare-and-DEL, then the all-or-none acquire for the next holder (see `isolate/handoff.ts`):
 * `released` as {@link releaseOnNode} says it, and whether the next holder now holds the keys.
 */
export async function handOverOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  next: { readonly token: string; readonly ttlMs: number },
  context: TaskContext,
): Promise<{ released: boolean; taken: boolean }> {
  const reply = await runScript(node, handOverScript, keys, [token, next.token, next.ttlMs], context);
  if (Array.isArray(reply) && reply.length === 2) {
    const [deleted, taken] = reply;
    if (typeof deleted === "number" && Number.isInteger(deleted) && deleted >= 0 && deleted <= keys.length) {
      if (taken === 0 || taken === 1) return { released: deleted > 0, taken: taken === 1 };
    }
  }
  throw unexpected(node, handOverScript.name, reply);
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

/**
 * The name of a (sorted) key set, under which an isolate remembers it (see `HotResources` in
 * hot-resources.ts) and the gate keeps its line: JSON, so that no other list of keys, and no single
 * key, has the same name (`["a","b"]` is not `["a\\nb"]`, nor `["[\\"a\\",\\"b\\"]"]`).
 */
export function hotKeyOf(keys: readonly string[]): string {
  // The last list named, by identity (a list of keys is never changed once made): an acquisition
  // names its keys, and their release names the same list, twice, often next.
  if (keys !== named) {
    named = keys;
    name = keys.length === 1 ? jsonOfOne(keys[0] as string) : JSON.stringify(keys);
  }
  return name;
}

/**
 * `JSON.stringify([key])`, built by hand for a key that JSON leaves as it is (no control
 * character, quote, backslash or surrogate): the serializer costs more than the scan, once per
 * acquisition.
 */
export function jsonOfOne(key: string): string {
  for (let i = 0; i < key.length; i++) {
    const unit = key.charCodeAt(i);
    if (unit < 0x20 || unit === 0x22 || unit === 0x5c || (unit >= 0xd800 && unit <= 0xdfff)) {
      return JSON.stringify([key]);
    }
  }
  return `["${key}"]`;
}

let named: readonly string[] | undefined;
let name: string;
