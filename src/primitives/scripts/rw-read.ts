/**
 * Take a read lock on one node: granted where no writer holds the lock and none is waiting.
 * Readers are members of a sorted set scored by their expiry on the node's own clock (`TIME`), so
 * a reader's entry expires as a key does, whatever the client's clock says.
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the write key, the readers' sorted set, the writer-waiting mark. ARGV[1]: token. ARGV[2]:
 * TTL in ms. Returns 1 when the reader was added (its entry expires TTL ms from now on the node's
 * clock; the set lives at least as long), 0 (and writes nothing) while a writer holds the lock or
 * a waiting writer's mark is set.
 */
export const rwReadScript: Script = /* @__PURE__ */ Object.freeze({
  name: "rw-read",
  source: `if redis.call("EXISTS", KEYS[1]) == 1 or redis.call("EXISTS", KEYS[3]) == 1 then
return 0
end
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now)
redis.call("ZADD", KEYS[2], now + ttl, ARGV[1])
if redis.call("PTTL", KEYS[2]) < ttl then
redis.call("PEXPIRE", KEYS[2], ttl)
end
return 1`,
  sha1: "8bc79ad962dabf21cd1f9f5e6bc8880c5d240fe8",
});
