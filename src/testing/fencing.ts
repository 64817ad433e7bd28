/**
 * The fencing scripts' semantics in TypeScript, for the memory node: a line-by-line mirror of the
 * Lua in src/fencing/scripts/ and src/fencing/guard.ts (`fence-rw-write`: {@link runFencedWrite}). The differential test
 * (test/integration/fencing-differential.test.ts) checks that both answer alike on a real
 * redis-server, so tests built on the memory node say something about the real scripts.
 * @module
 */
import { dropExpired, nodeNow, type PrimitiveStore } from "./primitives.js";

/**
 * The part of a node the scripts need. A script's own `error(...)` is thrown as
 * {@link ScriptError}; the store throws what a failed `redis.call` would (WRONGTYPE).
 */
export interface FenceStore {
  /** A string key's value (GET). */
  get(key: string): string | undefined;
  /** SET, with PX when `ttlMs` is given. */
  set(key: string, value: string, ttlMs?: number): void;
  exists(key: string): boolean;
  hget(key: string, field: string): string | undefined;
  hset(key: string, field: string, value: string): void;
}

const MAX = 9007199254740991;

/** Whether `text` is a counter as the scripts write it: a decimal integer without leading zeros, at most 2^53 - 1. */
function canonical(text: unknown): text is string {
  if (typeof text !== "string" || text.length > 16) return false;
  if (text !== "0" && !/^[1-9][0-9]*$/.test(text)) return false;
  return Number(text) <= MAX;
}

/** An `error(...)` raised by a script's own Lua (not by a command it called). */
export class ScriptError extends Error {}

function luaError(message: string): never {
  throw new ScriptError(message);
}

function counter(s: FenceStore, keys: string[], field: string): [number, string] {
  const text = s.hget(keys[2] as string, field);
  if (text === undefined) return [0, "0"];
  if (!canonical(text)) luaError("edge-redlock: corrupt fence counter");
  return [Number(text), text];
}

function highest(s: FenceStore, keys: string[], fields: string[]): [number, string] {
  let best = 0;
  let text = "0";
  for (const field of fields) {
    const [n, t] = counter(s, keys, field);
    if (n > best) [best, text] = [n, t];
  }
  return [best, text];
}

function parseMarker(marker: string): [string, string] | undefined {
  const match = /^([a-z]+):([0-9a-fA-F]+)$/.exec(marker);
  return match ? [match[1] as string, match[2] as string] : undefined;
}

function health(s: FenceStore, keys: string[], fields: string[]): [string, string] {
  const marker = s.get(keys[0] as string);
  if (marker === undefined) return ["NO_MARKER", ""];
  const parsed = parseMarker(marker);
  if (!parsed || (parsed[0] !== "ok" && parsed[0] !== "recovering")) {
    luaError("edge-redlock: corrupt incarnation marker");
  }
  const [state, id] = parsed;
  if (s.exists(keys[1] as string)) return ["QUARANTINED", id];
  if (state === "recovering") {
    for (const field of fields) if (s.hget(keys[3] as string, field) !== id) return ["NEEDS_REPAIR", id];
  }
  return ["OK", id];
}

/** Run the fencing script `name`; returns the reply, or throws like a Lua error. */
export function runFenceScript(s: FenceStore, name: string, keys: string[], argv: string[]): unknown {
  switch (name) {
    case "fence-acquire": {
      const fields = argv.slice(2);
      if (fields.length === 0 || fields.length !== keys.length - 4) {
        luaError("edge-redlock: lock keys and resources do not match");
      }
      const [status, id] = health(s, keys, fields);
      if (status !== "OK") return [status, "0", id];
      const [, fence] = highest(s, keys, fields);
      const lockKeys = keys.slice(4);
      for (const key of lockKeys) {
        const holder = s.get(key);
        if (holder !== undefined && holder !== argv[0]) return ["BUSY", fence, id];
      }
      for (const key of lockKeys) s.set(key, argv[0] as string, Number(argv[1]));
      return ["OK", fence, id];
    }
    case "fence-ratchet": {
      const fields = argv.slice(2);
      if (fields.length === 0 || fields.length !== keys.length - 4) {
        luaError("edge-redlock: lock keys and resources do not match");
      }
      if (!canonical(argv[1]) || argv[1] === "0") luaError("edge-redlock: invalid proposed fence");
      const [status, id] = health(s, keys, fields);
      if (status !== "OK") return [status, "0", id];
      const [best, fence] = highest(s, keys, fields);
      for (const key of keys.slice(4)) if (s.get(key) !== argv[0]) return ["LOST", fence, id];
      if (best >= Number(argv[1])) return ["NACK", fence, id];
      for (const field of fields) s.hset(keys[2] as string, field, argv[1] as string);
      return ["ACK", argv[1], id];
    }
    case "fence-read": {
      const [status, id] = health(s, keys, argv);
      if (status !== "OK") return [status, "0", id];
      return ["OK", highest(s, keys, argv)[1], id];
    }
    case "fence-repair": {
      if (argv.length < 3) luaError("edge-redlock: nothing to repair");
      if (!canonical(argv[1])) luaError("edge-redlock: invalid repair fence");
      const marker = s.get(keys[0] as string);
      if (marker === undefined) return ["NO_MARKER", "0", ""];
      const parsed = parseMarker(marker);
      if (!parsed) luaError("edge-redlock: corrupt incarnation marker");
      const current = parsed[1];
      if (marker !== `recovering:${argv[0]}`) return ["STALE", "0", current];
      if (s.exists(keys[1] as string)) return ["QUARANTINED", "0", current];
      const floor = Number(argv[1]);
      for (const field of argv.slice(2)) {
        if (counter(s, keys, field)[0] < floor) s.hset(keys[2] as string, field, argv[1] as string);
        s.hset(keys[3] as string, field, argv[0] as string);
      }
      return ["REPAIRED", argv[1], current];
    }
    case "fence-quarantine": {
      if (!/^[0-9a-fA-F]+$/.test(argv[0] ?? "")) luaError("edge-redlock: invalid incarnation id");
      const marker = s.get(keys[0] as string);
      if (marker !== undefined) return ["PRESENT", "0", parseMarker(marker)?.[1] ?? ""];
      s.set(keys[0] as string, `recovering:${argv[0]}`);
      s.set(keys[1] as string, argv[0] as string, Number(argv[1]));
      return ["QUARANTINED", "0", argv[0]];
    }
    case "fence-init": {
      if (!/^[0-9a-fA-F]+$/.test(argv[0] ?? "")) luaError("edge-redlock: invalid incarnation id");
      const marker = s.get(keys[0] as string);
      if (marker !== undefined) return ["PRESENT", "0", parseMarker(marker)?.[1] ?? ""];
      s.set(keys[0] as string, `ok:${argv[0]}`);
      return ["INITIALIZED", "0", argv[0]];
    }
    case "fenced-write": {
      const text = argv[0] as string;
      const fence = Number(text);
      if (!/^[1-9][0-9]*$/.test(text) || fence > MAX) luaError("fenced-write: the fence must be a positive integer");
      const seen = s.hget(keys[0] as string, "fence");
      if (seen !== undefined) {
        const last = Number(seen);
        if (fence < last || (fence === last && s.hget(keys[0] as string, "token") !== argv[1])) return [0, seen];
      }
      s.hset(keys[0] as string, "fence", text);
      s.hset(keys[0] as string, "token", argv[1] as string);
      s.set(keys[1] as string, argv[2] as string);
      return [1, text];
    }
    default:
      return undefined;
  }
}

/**
 * `fence-rw-write` (src/fencing/scripts/fence-rw-write.ts): the health check and counter read of
 * `fence-acquire`, then the write lock's step of `rw-write`, with our own write key taken as ours.
 */
export function runFencedWrite(s: FenceStore & PrimitiveStore, keys: string[], argv: string[]): unknown {
  if (keys.length !== 7 || argv.length !== 5 || argv[4] === "") luaError("edge-redlock: bad fenced write lock call");
  const fields = [argv[4] as string];
  const [status, id] = health(s, keys, fields);
  if (status !== "OK") return [status, "0", id];
  const [, fence] = highest(s, keys, fields);
  const [write, readers, mark] = keys.slice(4) as [string, string, string];
  const [token, ttl, writer, markTtl] = argv as [string, string, string, string];
  dropExpired(s, readers, nodeNow(s));
  const holder = s.get(write);
  if ((holder !== undefined && holder !== token) || s.exists(readers)) {
    if (markTtl !== "0") s.set(mark, writer, Number(markTtl));
    return ["BUSY", fence, id];
  }
  s.set(write, token, Number(ttl));
  if (s.get(mark) === writer) s.del(mark);
  return ["OK", fence, id];
}
