/**
 * A tiny Redis in memory: string keys with TTLs by an injected clock, hashes, and every script of
 * edge-redlock run as TypeScript. The memory node (memory-node.ts) and the library's own unit-test
 * fakes both run on it, so there is one model of the scripts, which
 * test/integration/*-differential.test.ts hold to a real redis-server.
 *
 * Semantics follow Redis where the library can tell: one keyspace (a key holds a string, a hash
 * or a sorted set, and a command on the wrong kind answers WRONGTYPE), `SET` replaces any kind, a TTL counts
 * on the node's own clock, `EVALSHA` answers NOSCRIPT for a script the node has not cached (a
 * restart empties the cache) and `EVAL` caches it.
 * @module
 */
import { NodeError } from "../base/errors.js";
import type { Script } from "../core/scripts/script.js";
import type { RedisArgument, RedisReply } from "../transport/rest.js";
import { type FenceStore, runFencedWrite, runFenceScript, ScriptError } from "./fencing.js";
import { type GateState, type GateStore, runGate, runGateRelease } from "./gate.js";
import { runPrimitiveScript } from "./primitives.js";
import { libraryScripts, scriptBySha, scriptBySource } from "./scripts.js";
import { sha1Hex } from "./sha1.js";

/** A string key: its value and when it expires on the node's clock (`Infinity`: no TTL). */
export interface StringEntry {
  value: string;
  expiresAt: number;
}

const WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER = "ERR value is not an integer or out of range";

/** The keyspace and script runner of one in-memory node. */
export class MemoryRedis implements GateStore, FenceStore {
  /** String keys, expired ones included until overwritten (a read treats them as missing). */
  readonly store = new Map<string, StringEntry>();
  /** Hash keys. */
  readonly hashes = new Map<string, Map<string, string>>();
  /** Sorted-set keys: member → score. */
  readonly zsets = new Map<string, Map<string, number>>();
  /** When a hash or sorted set with a TTL expires (one without a TTL has no entry). */
  readonly hashExpiry = new Map<string, number>();
  /** SHA-1s of the scripts the node has cached: `EVALSHA` runs only these. */
  readonly scriptCache = new Set<string>(libraryScripts.map((s) => s.sha1));
  /** Each gate's line and statistics, by its queue key (see gate.ts). */
  readonly gates = new Map<string, GateState>();

  /**
   * @param id the node's id, in its errors.
   * @param clock the clock TTLs count on, read at every command.
   */
  constructor(
    readonly id: string,
    readonly clock: { now(): number },
  ) {}

  /** The node's time. */
  now(): number {
    return this.clock.now();
  }

  /** Lose everything, as a redis-server restarted without persistence (script cache included). */
  restart(): void {
    this.store.clear();
    this.hashes.clear();
    this.zsets.clear();
    this.hashExpiry.clear();
    this.scriptCache.clear();
    this.gates.clear();
  }

  /** A live string key's entry. */
  private live(key: string): StringEntry | undefined {
    const entry = this.store.get(key);
    return entry && entry.expiresAt > this.now() ? entry : undefined;
  }

  /** A live hash key (an expired one is dropped). */
  private hash(key: string): Map<string, string> | undefined {
    const expiresAt = this.hashExpiry.get(key);
    if (expiresAt !== undefined && expiresAt <= this.now()) {
      this.hashes.delete(key);
      this.hashExpiry.delete(key);
    }
    return this.hashes.get(key);
  }

  /** A live sorted set (an expired one is dropped; so is one left empty). */
  private zset(key: string): Map<string, number> | undefined {
    const expiresAt = this.hashExpiry.get(key);
    const zset = this.zsets.get(key);
    if ((expiresAt !== undefined && expiresAt <= this.now()) || zset?.size === 0) {
      this.zsets.delete(key);
      if (!this.hashes.has(key)) this.hashExpiry.delete(key);
      return undefined;
    }
    return zset;
  }

  /** A live sorted set for writing: WRONGTYPE on a string or hash; created empty when missing. */
  sortedSet(key: string): Map<string, number> {
    if (this.live(key) || this.hash(key)) throw this.error(WRONGTYPE);
    let zset = this.zset(key);
    if (zset === undefined) {
      this.store.delete(key);
      this.hashExpiry.delete(key);
      zset = new Map();
      this.zsets.set(key, zset);
    }
    return zset;
  }

  /** A live sorted set for reading: WRONGTYPE on a string or hash. */
  readSortedSet(key: string): ReadonlyMap<string, number> | undefined {
    if (this.live(key) || this.hash(key)) throw this.error(WRONGTYPE);
    return this.zset(key);
  }

  /** GET: the value of a live string key; WRONGTYPE on a hash. */
  get(key: string): string | undefined {
    if (this.hash(key) || this.zset(key)) throw this.error(WRONGTYPE);
    return this.live(key)?.value;
  }

  /** PTTL: -2 when the key is missing, -1 when it has no TTL. */
  pttl(key: string): number {
    if (this.hash(key) || this.zset(key)) {
      const expiresAt = this.hashExpiry.get(key);
      return expiresAt === undefined ? -1 : expiresAt - this.now();
    }
    const entry = this.live(key);
    if (!entry) return -2;
    return entry.expiresAt === Number.POSITIVE_INFINITY ? -1 : entry.expiresAt - this.now();
  }

  /** EXISTS of one key. */
  exists(key: string): boolean {
    return this.hash(key) !== undefined || this.zset(key) !== undefined || this.live(key) !== undefined;
  }

  /** SET, replacing a key of any kind; with a TTL when `ttlMs` is given. */
  set(key: string, value: string, ttlMs?: number): void {
    this.hashes.delete(key);
    this.zsets.delete(key);
    this.hashExpiry.delete(key);
    this.store.set(key, { value, expiresAt: ttlMs === undefined ? Number.POSITIVE_INFINITY : this.now() + ttlMs });
  }

  /** DEL of one key: 1 when it existed. */
  del(key: string): number {
    const existed = this.exists(key);
    this.store.delete(key);
    this.hashes.delete(key);
    this.zsets.delete(key);
    this.hashExpiry.delete(key);
    return existed ? 1 : 0;
  }

  /** HGET; WRONGTYPE on a string. */
  hget(key: string, field: string): string | undefined {
    if (this.live(key) || this.zset(key)) throw this.error(WRONGTYPE);
    return this.hash(key)?.get(field);
  }

  /** HSET of one field: 1 when the field is new; WRONGTYPE on a string. */
  hset(key: string, field: string, value: string): number {
    if (this.live(key) || this.zset(key)) throw this.error(WRONGTYPE);
    this.store.delete(key);
    const hash = this.hash(key) ?? new Map<string, string>();
    this.hashes.set(key, hash);
    const added = hash.has(field) ? 0 : 1;
    hash.set(field, value);
    return added;
  }

  /** HDEL of one field: 1 when it was there; a hash left empty is gone, as in Redis. */
  hdel(key: string, field: string): number {
    if (this.live(key) || this.zset(key)) throw this.error(WRONGTYPE);
    const hash = this.hash(key);
    if (!hash?.delete(field)) return 0;
    if (hash.size === 0) {
      this.hashes.delete(key);
      this.hashExpiry.delete(key);
    }
    return 1;
  }

  /** PEXPIRE: 0 for a missing key; a TTL of 0 or less deletes the key. */
  pexpire(key: string, ttlMs: number): number {
    if (!this.exists(key)) return 0;
    if (ttlMs <= 0) this.del(key);
    else if (this.hashes.has(key) || this.zsets.has(key)) this.hashExpiry.set(key, this.now() + ttlMs);
    else (this.store.get(key) as StringEntry).expiresAt = this.now() + ttlMs;
    return 1;
  }

  /** Every live key, strings and hashes, sorted. */
  keys(): string[] {
    const strings = [...this.store.keys()].filter((key) => this.live(key));
    const hashes = [...this.hashes.keys()].filter((key) => this.hash(key));
    const zsets = [...this.zsets.keys()].filter((key) => this.zset(key));
    return [...strings, ...hashes, ...zsets].sort();
  }

  /** A Redis error answer, shaped as a REST node reports one. */
  error(redisError: string): NodeError {
    return new NodeError(this.id, `${this.id} answered with an error (HTTP 400): ${redisError}`, {
      status: 400,
      redisError,
    });
  }

  /** Apply one command; throws a {@link NodeError} where Redis answers an error. */
  execute(args: readonly RedisArgument[]): RedisReply {
    const [name = "", ...rest] = args.map(String);
    const command = name.toUpperCase();
    const arity = (min: number) => {
      if (rest.length < min) throw this.error(`ERR wrong number of arguments for '${command.toLowerCase()}' command`);
    };
    switch (command) {
      case "SET":
        arity(2);
        return this.setCommand(rest);
      case "GET":
        arity(1);
        return this.get(rest[0] as string) ?? null;
      case "PTTL":
        arity(1);
        return this.pttl(rest[0] as string);
      case "PEXPIRE":
        arity(2);
        return this.pexpire(rest[0] as string, this.integer(rest[1]));
      case "DEL":
        arity(1);
        return rest.reduce((deleted, key) => deleted + this.del(key), 0);
      case "EXISTS":
        arity(1);
        return rest.filter((key) => this.exists(key)).length;
      case "INCR": {
        arity(1);
        const key = rest[0] as string;
        const value = this.integer(this.get(key) ?? "0") + 1;
        const entry = this.live(key);
        this.store.set(key, { value: String(value), expiresAt: entry?.expiresAt ?? Number.POSITIVE_INFINITY });
        return value;
      }
      case "HGET":
        arity(2);
        return this.hget(rest[0] as string, rest[1] as string) ?? null;
      case "HSET": {
        arity(3);
        if (rest.length % 2 === 0) throw this.error("ERR wrong number of arguments for 'hset' command");
        let added = 0;
        for (let i = 1; i < rest.length; i += 2)
          added += this.hset(rest[0] as string, rest[i] as string, rest[i + 1] as string);
        return added;
      }
      case "ZSCORE": {
        arity(2);
        const score = this.readSortedSet(rest[0] as string)?.get(rest[1] as string);
        return score === undefined ? null : String(score);
      }
      case "ZCARD":
        arity(1);
        return this.readSortedSet(rest[0] as string)?.size ?? 0;
      case "ZADD": {
        // `ZADD key score member [score member …]`, without flags.
        if (rest.length < 3 || rest.length % 2 === 0) throw this.error("ERR syntax error");
        const pairs: [number, string][] = [];
        for (let i = 1; i < rest.length; i += 2) {
          const score = Number(rest[i]);
          if (Number.isNaN(score)) throw this.error("ERR value is not a valid float");
          pairs.push([score, rest[i + 1] as string]);
        }
        const zset = this.sortedSet(rest[0] as string);
        const before = zset.size;
        for (const [score, member] of pairs) zset.set(member, score);
        return zset.size - before;
      }
      case "ZRANGE": {
        // `ZRANGE key start stop [WITHSCORES]`, by rank.
        arity(3);
        const sorted = [...(this.readSortedSet(rest[0] as string) ?? [])].sort(
          ([m1, s1], [m2, s2]) => s1 - s2 || (m1 < m2 ? -1 : m1 > m2 ? 1 : 0),
        );
        const at = (text: string | undefined) => {
          const i = this.integer(text);
          return i < 0 ? sorted.length + i : i;
        };
        const range = sorted.slice(Math.max(0, at(rest[1])), at(rest[2]) + 1);
        const scores = rest[3]?.toUpperCase() === "WITHSCORES";
        return range.flatMap(([member, score]) => (scores ? [member, String(score)] : [member]));
      }
      case "PING":
        return "PONG";
      case "TIME": {
        // As Redis answers: whole seconds and the microseconds within, as strings.
        const micros = Math.floor(this.now() * 1000);
        return [String(Math.floor(micros / 1_000_000)), String(micros % 1_000_000)];
      }
      case "EVAL":
      case "EVALSHA":
        arity(2);
        return this.evalCommand(command, rest);
      default:
        // The command's name only: its arguments may carry a token.
        throw this.error(/^[A-Za-z]{1,20}$/.test(name) ? `ERR unknown command '${name}'` : "ERR unknown command");
    }
  }

  /** `SET key value [NX|XX] [PX ms|EX s|KEEPTTL]`. */
  private setCommand([key, value, ...options]: string[]): RedisReply {
    let nx = false;
    let xx = false;
    let keepTtl = false;
    let ttlMs: number | undefined;
    for (let i = 0; i < options.length; i++) {
      const option = (options[i] as string).toUpperCase();
      if (option === "NX" && !xx) nx = true;
      else if (option === "XX" && !nx) xx = true;
      else if (option === "KEEPTTL" && ttlMs === undefined) keepTtl = true;
      else if ((option === "PX" || option === "EX") && ttlMs === undefined && !keepTtl && i + 1 < options.length) {
        const amount = this.integer(options[++i]);
        if (amount <= 0) throw this.error("ERR invalid expire time in 'set' command");
        ttlMs = option === "EX" ? amount * 1000 : amount;
      } else throw this.error("ERR syntax error");
    }
    const exists = this.exists(key as string);
    if ((nx && exists) || (xx && !exists)) return null;
    const kept = keepTtl ? this.live(key as string)?.expiresAt : undefined;
    this.set(key as string, value as string, ttlMs);
    if (kept !== undefined) (this.store.get(key as string) as StringEntry).expiresAt = kept;
    return "OK";
  }

  /** `EVALSHA sha numkeys key... arg...` or `EVAL source numkeys key... arg...`. */
  private evalCommand(command: "EVAL" | "EVALSHA", [ref, count, ...tail]: string[]): RedisReply {
    const keyCount = this.integer(count);
    if (keyCount < 0) throw this.error("ERR Number of keys can't be negative");
    if (keyCount > tail.length) throw this.error("ERR Number of keys can't be greater than number of args");
    let script: Script | undefined;
    if (command === "EVALSHA") {
      script = this.scriptCache.has((ref as string).toLowerCase()) ? scriptBySha(ref as string) : undefined;
      if (!script) throw this.error("NOSCRIPT No matching script. Please use EVAL.");
    } else {
      script = scriptBySource(ref as string);
      // Named by its SHA, as Redis names scripts: never by its arguments, which may carry a token.
      if (!script) {
        throw this.error(`ERR a memory node runs edge-redlock's scripts only, not script ${sha1Hex(ref as string)}`);
      }
      this.scriptCache.add(script.sha1);
    }
    try {
      return this.runScript(script.name, tail.slice(0, keyCount), tail.slice(keyCount));
    } catch (error) {
      if (!(error instanceof ScriptError)) throw error;
      throw this.error(`ERR user_script: ${error.message} script: ${script.sha1}`);
    }
  }

  /** A decimal integer argument, as Redis parses one. */
  private integer(text: string | undefined): number {
    // As Redis parses: no sign but a leading minus, no leading zero, no space.
    if (text === undefined || !/^(0|-?[1-9]\d{0,15})$/.test(text) || !Number.isSafeInteger(Number(text))) {
      throw this.error(NOT_INTEGER);
    }
    return Number(text);
  }

  /** A TTL a script passes to `SET ... PX`. */
  private ttl(text: string | undefined): number {
    const ttlMs = this.integer(text);
    if (ttlMs <= 0) throw this.error("ERR invalid expire time in 'set' command");
    return ttlMs;
  }

  /**
   * Run library script `name` on `keys` and `argv`, as its Lua does (src/core/scripts,
   * src/waiting/scripts, src/fencing/scripts, src/fencing/guard.ts). Throws a {@link ScriptError}
   * where the Lua calls `error()`.
   */
  runScript(name: string, keys: string[], argv: string[]): RedisReply {
    const [token = "", ttl] = argv;
    switch (name) {
      case "acquire-all":
        if (keys.some((key) => this.exists(key))) return 0;
        for (const key of keys) this.set(key, token, this.ttl(ttl));
        return 1;
      case "extend":
        if (keys.some((key) => this.get(key) !== token)) return 0;
        for (const key of keys) this.pexpire(key, this.integer(ttl));
        return 1;
      case "release":
        return this.deleteHeld(keys, token);
      case "hand-over": {
        const deleted = this.deleteHeld(keys, token);
        if (keys.some((key) => this.exists(key))) return [deleted, 0];
        for (const key of keys) this.set(key, argv[1] as string, this.ttl(argv[2]));
        return [deleted, 1];
      }
      case "verify": {
        let least = -1;
        for (const key of keys) {
          if (this.get(key) !== token) return -1;
          const pttl = this.pttl(key);
          if (least === -1 || pttl < least) least = pttl;
        }
        return least;
      }
      case "inspect": {
        const key = keys[0] as string;
        return [this.get(key) ?? null, this.pttl(key)];
      }
      case "cluster": {
        // The fingerprint key has no TTL: `check` keeps the first fingerprint, `reset` replaces it.
        const key = keys[0] as string;
        if (argv[1] === "reset" || !this.exists(key)) this.set(key, token);
        return this.get(key) ?? null;
      }
      case "gate":
        return runGate(this, keys, argv);
      case "gate-release":
        return runGateRelease(this, keys, argv);
      case "fence-rw-write":
        return runFencedWrite(this, keys, argv) as RedisReply;
      default: {
        const reply = runPrimitiveScript(this, name, keys, argv) ?? runFenceScript(this, name, keys, argv);
        if (reply === undefined) throw new Error(`the memory node has no model of script ${name}`);
        return reply as RedisReply;
      }
    }
  }

  /** DEL of each key that holds `token`: how many were deleted. */
  private deleteHeld(keys: readonly string[], token: string): number {
    let deleted = 0;
    for (const key of keys) if (this.get(key) === token) deleted += this.del(key);
    return deleted;
  }
}
