/**
 * Release a read or write lock on one node: compare-and-DEL of the write key, removal of the
 * reader's entry, and (optionally) the clearing of a waiting writer's own mark.
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the write key, the readers' sorted set, the writer-waiting mark. ARGV[1]: token. ARGV[2]:
 * a waiting writer's id whose mark to clear, or "" for none. Returns 1 when the token held the
 * write key or a live reader entry (now deleted), else 0.
 */
export const rwReleaseScript: Script = /* @__PURE__ */ Object.freeze({
  name: "rw-release",
  source: `local released = 0
if redis.call("GET", KEYS[1]) == ARGV[1] then
released = redis.call("DEL", KEYS[1])
end
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now)
released = released + redis.call("ZREM", KEYS[2], ARGV[1])
if ARGV[2] ~= "" and redis.call("GET", KEYS[3]) == ARGV[2] then
redis.call("DEL", KEYS[3])
end
return released`,
  sha1: "6af5740614c326b9d4019779637cf159e927ec43",
});
