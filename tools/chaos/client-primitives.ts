/**
 * The semaphores and read-write locks a chaos worker takes (see `Primitive` in protocol.ts), and
 * the broken ones of the negative controls, built on the library's own client by rewriting what it
 * sends to the nodes:
 * - `count-per-node`: the design of redis-semaphore's `RedlockSemaphore`. A slot's `SET NX` becomes
 *   an admission by a count of holders per node (a sorted set; admitted while fewer than the
 *   permits hold), and each holder gets a key of its own, so the permit's extend and release still
 *   run the library's scripts on it;
 * - `read-ignores-writer`: a read lock whose script adds the reader whatever the write key says.
 * @module
 */

import { releaseScript } from "../../src/core/scripts/release.js";
import {
  type Lock,
  ReadWriteLock,
  type RedisArgument,
  type RedisNode,
  type Redlock,
  Semaphore,
} from "../../src/index.js";
import { rwReadScript } from "../../src/primitives/scripts/rw-read.js";
import type { Primitive } from "./protocol.js";
import type { Rng } from "./rng.js";

/** The mode a grant is recorded with. */
export type GrantMode = "permit" | "read" | "write";

/** Takes the primitives a worker's targets name, each made once. */
export class PrimitiveTaker {
  readonly #redlock: Redlock;
  readonly #primitive: Primitive;
  readonly #rng: Rng;
  readonly #semaphores = new Map<string, Semaphore>();
  readonly #locks = new Map<string, ReadWriteLock>();

  constructor(redlock: Redlock, primitive: Primitive, rng: Rng) {
    this.#redlock = redlock;
    this.#primitive = primitive;
    this.#rng = rng;
  }

  /** The mode of the next grant: a permit, or the side asked for (drawn by the write share when none). */
  modeFor(asked: "read" | "write" | undefined): GrantMode {
    const p = this.#primitive;
    if (p.kind === "semaphore") return "permit";
    return asked ?? (this.#rng.next() < p.writeShare ? "write" : "read");
  }

  /** What a grant's events carry besides a mutex's. */
  fields(mode: GrantMode): { mode: GrantMode; permits?: number } {
    const p = this.#primitive;
    return p.kind === "semaphore" ? { mode, permits: p.permits } : { mode };
  }

  /** One acquisition (`once`: a single try): a Lock, or null when held. */
  take(name: string, mode: GrantMode, ttlMs: number, once: boolean): Promise<Lock | null> {
    const p = this.#primitive;
    if (p.kind === "semaphore") {
      let semaphore = this.#semaphores.get(name);
      if (!semaphore) {
        semaphore = new Semaphore(this.#redlock, name, p.permits);
        this.#semaphores.set(name, semaphore);
      }
      return once ? semaphore.tryAcquire(ttlMs) : semaphore.acquire(ttlMs);
    }
    let lock = this.#locks.get(name);
    if (!lock) {
      lock = new ReadWriteLock(this.#redlock, name);
      this.#locks.set(name, lock);
    }
    if (mode === "write") return once ? lock.tryAcquireWrite(ttlMs) : lock.acquireWrite(ttlMs);
    return once ? lock.tryAcquireRead(ttlMs) : lock.acquireRead(ttlMs);
  }
}

/** A node that runs the broken design of a negative control instead of the library's (see the module). */
export function brokenNode(node: RedisNode, primitive: Primitive): RedisNode {
  return {
    id: node.id,
    command(args, signal) {
      return node.command(primitive.broken === undefined ? args : rewrite(args, primitive), signal);
    },
  };
}

const NOW = `local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)`;

/** KEYS: the count, the holder's own key. ARGV: token, TTL, permits. `OK` when admitted, nil otherwise. */
const COUNT_ADMIT = `${NOW}
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
if redis.call("ZCARD", KEYS[1]) >= tonumber(ARGV[3]) then
return false
end
redis.call("ZADD", KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
if redis.call("PTTL", KEYS[1]) < tonumber(ARGV[2]) then
redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
redis.call("SET", KEYS[2], ARGV[1], "PX", ARGV[2])
return "OK"`;

/** KEYS: the count, the holder's own key. ARGV: token. Leaves the count and deletes the key if ours. */
const COUNT_RELEASE = `redis.call("ZREM", KEYS[1], ARGV[1])
if redis.call("GET", KEYS[2]) == ARGV[1] then
return redis.call("DEL", KEYS[2])
end
return 0`;

/** The read lock's script without its checks: the reader goes in whatever holds the lock. */
const READ_IGNORING_WRITER = `${NOW}
redis.call("ZADD", KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
if redis.call("PTTL", KEYS[2]) < tonumber(ARGV[2]) then
redis.call("PEXPIRE", KEYS[2], ARGV[2])
end
return 1`;

const isSlot = (key: unknown): key is string => typeof key === "string" && key.includes("__edge-redlock__:semaphore:");
/** The count of a slot's semaphore: its slot keys without the slot number. */
const countKey = (slot: string) => `${slot.slice(0, slot.lastIndexOf(":"))}:count`;
const holderKey = (slot: string, token: string) => `${slot}#${token}`;

function rewrite(args: readonly RedisArgument[], primitive: Primitive): readonly RedisArgument[] {
  const [command, script, numKeys, ...rest] = args;
  if (primitive.kind === "semaphore") {
    // SET slot token NX PX ttl: admitted by the count instead.
    if (command === "SET" && isSlot(script)) {
      const token = String(numKeys);
      const ttl = args[5] as RedisArgument;
      return ["EVAL", COUNT_ADMIT, 2, countKey(script), holderKey(script, token), token, ttl, primitive.permits];
    }
    // A script on one slot key (extend, release, verify): on the holder's own key.
    // (The probe's keys come without a token: left alone.)
    if ((command === "EVALSHA" || command === "EVAL") && Number(numKeys) === 1 && isSlot(rest[0]) && rest.length > 1) {
      const slot = rest[0];
      const token = String(rest[1]);
      if (script === releaseScript.sha1 || script === releaseScript.source) {
        return ["EVAL", COUNT_RELEASE, 2, countKey(slot), holderKey(slot, token), token];
      }
      return [command, script as RedisArgument, 1, holderKey(slot, token), ...rest.slice(1)];
    }
    return args;
  }
  if (
    (command === "EVALSHA" || command === "EVAL") &&
    (script === rwReadScript.sha1 || script === rwReadScript.source)
  ) {
    return ["EVAL", READ_IGNORING_WRITER, numKeys as RedisArgument, ...rest];
  }
  return args;
}
