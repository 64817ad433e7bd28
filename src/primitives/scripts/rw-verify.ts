/**
 * Check a read or write lock on one node: what is left of its write key or reader entry.
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the write key, the readers' sorted set, the writer-waiting mark. ARGV[1]: token. Returns
 * the ms left of the write key or reader entry the token holds (on the node's clock), or -1 when
 * it holds neither.
 */
export const rwVerifyScript: Script = /* @__PURE__ */ Object.freeze({
  name: "rw-verify",
  source: `if redis.call("GET", KEYS[1]) == ARGV[1] then
return redis.call("PTTL", KEYS[1])
end
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local score = redis.call("ZSCORE", KEYS[2], ARGV[1])
if not score then
return -1
end
local left = tonumber(score) - now
if left > 0 then
return left
end
return -1`,
  sha1: "a99e12bad946a10dd5e9418b8f9fec1cddb6a130",
});
