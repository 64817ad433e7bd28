/**
 * The scripts of the semaphore and the read-write lock (src/primitives/scripts) in TypeScript, for
 * the memory node. test/integration/primitives-differential.test.ts checks that they answer like
 * the Lua on a real redis-server. Reader entries and the leases of a semaphore's line expire by the
 * node's own clock, as the Lua's `TIME` reads it (whole milliseconds).
 * @module
 */
import type { RedisReply } from "../transport/rest.js";

/** What the primitives' scripts need of a node: strings and sorted sets with expiry, and its time. */
export interface PrimitiveStore {
  get(key: string): string | undefined;
  set(key: string, value: string, ttlMs?: number): void;
  del(key: string): number;
  exists(key: string): boolean;
  /** Remaining TTL in ms: -2 when missing, -1 without a TTL. */
  pttl(key: string): number;
  pexpire(key: string, ttlMs: number): number;
  now(): number;
  /** A live sorted set for writing (created empty when missing). */
  sortedSet(key: string): Map<string, number>;
  /** A live sorted set for reading. */
  readSortedSet(key: string): ReadonlyMap<string, number> | undefined;
  hget(key: string, field: string): string | undefined;
  hset(key: string, field: string, value: string): number;
  hdel(key: string, field: string): number;
}

/** The node's time as the scripts compute it from `TIME`: whole milliseconds. */
export function nodeNow(store: PrimitiveStore): number {
  return Math.floor(store.now());
}

/** `ZREMRANGEBYSCORE key -inf now`: drop the readers whose entries expired. */
export function dropExpired(store: PrimitiveStore, key: string, now: number): void {
  if (store.readSortedSet(key) === undefined) return;
  const zset = store.sortedSet(key);
  for (const [member, score] of zset) if (score <= now) zset.delete(member);
}

/** Add or move a reader entry, and keep the set alive at least as long as it. */
function setReader(store: PrimitiveStore, key: string, token: string, now: number, ttlMs: number): void {
  store.sortedSet(key).set(token, now + ttlMs);
  if (store.pttl(key) < ttlMs) store.pexpire(key, ttlMs);
}

/**
 * Run primitive script `name` on `keys` and `argv`, as its Lua does; `undefined` when `name` is
 * not one of them.
 */
export function runPrimitiveScript(
  store: PrimitiveStore,
  name: string,
  keys: readonly string[],
  argv: readonly string[],
): RedisReply | undefined {
  const [write = "", readers = "", mark = ""] = keys;
  const [token = "", ttl = "0", writer = "", markTtl = "0"] = argv;
  switch (name) {
    case "semaphore-probe":
      return keys.map((key) => (store.exists(key) ? "h" : "f")).join("");
    case "semaphore-line":
      return semaphoreLine(store, keys, argv);
    case "rw-read": {
      if (store.exists(write) || store.exists(mark)) return 0;
      const now = nodeNow(store);
      dropExpired(store, readers, now);
      setReader(store, readers, token, now, Number(ttl));
      return 1;
    }
    case "rw-write": {
      dropExpired(store, readers, nodeNow(store));
      if (store.exists(write) || store.exists(readers)) {
        if (markTtl !== "0") store.set(mark, writer, Number(markTtl));
        return 0;
      }
      store.set(write, token, Number(ttl));
      if (store.get(mark) === writer) store.del(mark);
      return 1;
    }
    case "rw-release": {
      // ARGV[2] is the id of a waiting writer whose mark to clear.
      let released = 0;
      if (store.get(write) === token) released = store.del(write);
      dropExpired(store, readers, nodeNow(store));
      if (store.readSortedSet(readers)?.has(token)) {
        store.sortedSet(readers).delete(token);
        released++;
      }
      const clear = argv[1] ?? "";
      if (clear !== "" && store.get(mark) === clear) store.del(mark);
      return released;
    }
    case "rw-extend": {
      if (store.get(write) === token) {
        store.pexpire(write, Number(ttl));
        return 1;
      }
      const now = nodeNow(store);
      dropExpired(store, readers, now);
      if (!store.readSortedSet(readers)?.has(token)) return 0;
      setReader(store, readers, token, now, Number(ttl));
      return 1;
    }
    case "rw-verify": {
      if (store.get(write) === token) return store.pttl(write);
      const score = store.readSortedSet(readers)?.get(token);
      if (score === undefined) return -1;
      const left = score - nodeNow(store);
      return left > 0 ? left : -1;
    }
    default:
      return undefined;
  }
}

/** The line of a semaphore's waiters on its gate node, as `semaphore-line.ts` keeps it. */
function semaphoreLine(store: PrimitiveStore, keys: readonly string[], argv: readonly string[]): RedisReply {
  const [waiter = "", mode = "", leaseArg = "0", kArg = "0"] = argv;
  const k = Number(kArg);
  const line = keys[k] as string;
  const leases = keys[k + 1] as string;
  const now = nodeNow(store);
  for (const [member, expiry] of store.readSortedSet(leases) ?? []) {
    if (expiry > now) continue;
    if (store.readSortedSet(line)?.has(member)) store.sortedSet(line).delete(member);
    store.sortedSet(leases).delete(member);
  }
  if (mode === "leave") {
    if (store.readSortedSet(line)?.has(waiter)) store.sortedSet(line).delete(waiter);
    if (store.readSortedSet(leases)?.has(waiter)) store.sortedSet(leases).delete(waiter);
    return [-1, store.readSortedSet(line)?.size ?? 0, "", ""];
  }
  if (!store.readSortedSet(line)?.has(waiter)) {
    const last = Math.max(0, ...(store.readSortedSet(line)?.values() ?? []));
    store.sortedSet(line).set(waiter, last + 1);
  }
  const lease = Number(leaseArg);
  store.sortedSet(leases).set(waiter, now + lease);
  for (const key of [line, leases]) if (store.pttl(key) < lease + 1000) store.pexpire(key, lease + 1000);
  const order = [...(store.readSortedSet(line) ?? [])].sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0));
  const { slots, due } = slotHolds(store, keys.slice(0, k), keys[k + 2] as string, now);
  return [order.findIndex(([member]) => member === waiter), order.length, slots.join(""), due.join(",")];
}

/** Per slot, held (`h`) or free (`f`) on this node, and when its holder should let go (see the script). */
function slotHolds(
  store: PrimitiveStore,
  slotKeys: readonly string[],
  holds: string,
  now: number,
): { slots: string[]; due: number[] } {
  let hold = Number(store.hget(holds, "hold") ?? "-1");
  const slots: string[] = [];
  const due: number[] = [];
  slotKeys.forEach((key, index) => {
    const i = index + 1;
    let value: string | undefined;
    try {
      value = store.get(key);
    } catch {
      value = "?";
    }
    const seen = store.hget(holds, `v${i}`);
    if (value !== undefined) {
      slots.push("h");
      let at = now;
      if (seen === value) at = Number(store.hget(holds, `t${i}`));
      else {
        store.hset(holds, `v${i}`, value);
        store.hset(holds, `t${i}`, String(now));
      }
      due.push(hold >= 0 ? Math.max(0, at + hold - now) : -1);
    } else {
      slots.push("f");
      due.push(0);
      if (seen !== undefined) {
        const held = now - Number(store.hget(holds, `t${i}`));
        hold = hold >= 0 ? Math.floor((3 * hold + held) / 4) : held;
        store.hset(holds, "hold", String(hold));
        store.hdel(holds, `v${i}`);
        store.hdel(holds, `t${i}`);
      }
    }
  });
  store.pexpire(holds, 600_000);
  return { slots, due };
}
