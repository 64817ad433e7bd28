/**
 * Extend a read or write lock on one node: compare-and-PEXPIRE of the write key, or a new expiry
 * for a reader entry that is still live on the node's clock. Never revives an expired entry.
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the write key, the readers' sorted set, the writer-waiting mark. ARGV[1]: token. ARGV[2]:
 * new TTL in ms. Returns 1 when extended, 0 when the token holds neither the write key nor a live
 * reader entry.
 */
export const rwExtendScript: Script = /* @__PURE__ */ Object.freeze({
  name: "rw-extend",
  source: `if redis.call("GET", KEYS[1]) == ARGV[1] then
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return 1
end
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now)
if not redis.call("ZSCORE", KEYS[2], ARGV[1]) then
return 0
end
local ttl = tonumber(ARGV[2])
redis.call("ZADD", KEYS[2], "XX", now + ttl, ARGV[1])
if redis.call("PTTL", KEYS[2]) < ttl then
redis.call("PEXPIRE", KEYS[2], ttl)
end
return 1`,
  sha1: "e6270b38f04a903431b990312bded3cef16b2aa4",
});
