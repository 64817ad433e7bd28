/**
 * The resource side of fencing: how a store protected by a fenced lock rejects stale writers.
 *
 * A fence only helps if the protected resource checks it, atomically with the write. The rule:
 * accept a write carrying fence `t` (and the lock's token) when `t > maxSeen`, or when
 * `t == maxSeen` and the token is the one that set `maxSeen` (the same holder writing again);
 * then record `(t, token)` and apply the write. Anything else comes from a holder whose lock was
 * superseded (paused, delayed, expired) and is rejected.
 *
 * Comparing the token as well as the fence is defence in depth: fences are unique as long as no
 * more nodes silently lose data than `faultTolerance` allows, and the token check turns a
 * violation of that assumption into a rejected write instead of two interleaved writers.
 * @module
 */
import type { Script } from "../core/scripts/script.js";

/**
 * A fenced write for a protected Redis store (not one of the lock nodes).
 *
 * KEYS[1]: a hash holding the last accepted `fence` and `token` for the protected record.
 * KEYS[2]: the record. ARGV[1]: the writer's fence (decimal string). ARGV[2]: the writer's lock
 * token ("" to compare fences only). ARGV[3]: the value to store.
 *
 * Returns `{1, fence}` when the write was applied, `{0, maxSeen}` when it was rejected as stale.
 * Fences are compared as numbers: they are integers below 2^53, exact in Lua's doubles.
 */
export const fencedWriteScript: Script = Object.freeze({
  name: "fenced-write",
  source: `local fence = tonumber(ARGV[1])
if not fence or not string.match(ARGV[1], "^[1-9]%d*$") or fence > 9007199254740991 then
error("fenced-write: the fence must be a positive integer")
end
local seen = redis.call("HGET", KEYS[1], "fence")
if seen then
local last = tonumber(seen)
if fence < last or (fence == last and redis.call("HGET", KEYS[1], "token") ~= ARGV[2]) then
return {0, seen}
end
end
redis.call("HSET", KEYS[1], "fence", ARGV[1], "token", ARGV[2])
redis.call("SET", KEYS[2], ARGV[3])
return {1, ARGV[1]}`,
  sha1: "9038361652bcb1245758279fec496b421c011f20",
});

/**
 * The same rule for an SQL table: add `fence` and `fence_token` columns to the protected rows
 * and make every write conditional. `$1` is the new value, `$2` the fence (a bigint column;
 * pass the decimal string), `$3` the lock token, `$4` the row's key. Zero rows updated means the
 * write was stale: give up, do not retry with the same fence.
 */
export const FENCED_SQL_UPDATE = `UPDATE accounts
   SET balance = $1, fence = $2, fence_token = $3
 WHERE id = $4
   AND (fence < $2 OR (fence = $2 AND fence_token = $3))`;

/**
 * Compare two fences given as decimal strings: negative when `a` is older than `b`, zero when
 * equal, positive when newer. Works for any length, so callers need not parse them.
 */
export function compareFences(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}
