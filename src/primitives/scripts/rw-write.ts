/**
 * Take a write lock on one node: granted where no writer holds the lock and no reader's entry is
 * live on the node's clock. A refusal leaves the writer's waiting mark, which stops new readers
 * until the writer's next attempt (so writers do not starve); a grant clears the writer's own mark.
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the write key, the readers' sorted set, the writer-waiting mark. ARGV[1]: token. ARGV[2]:
 * TTL in ms. ARGV[3]: the waiting writer's id (one per acquire call). ARGV[4]: the mark's TTL in ms
 * ("0": leave no mark). Drops the readers whose entries expired. Returns 1 when the write key was
 * set, 0 when a writer or a live reader holds the lock (then the mark is set, unless ARGV[4] is 0).
 */
export const rwWriteScript: Script = /* @__PURE__ */ Object.freeze({
  name: "rw-write",
  source: `local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now)
if redis.call("EXISTS", KEYS[1]) == 1 or redis.call("EXISTS", KEYS[2]) == 1 then
if ARGV[4] ~= "0" then
redis.call("SET", KEYS[3], ARGV[3], "PX", ARGV[4])
end
return 0
end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
if redis.call("GET", KEYS[3]) == ARGV[3] then
redis.call("DEL", KEYS[3])
end
return 1`,
  sha1: "ecdf6821f2099fbc00ed8aa0f8506e3d55136ef0",
});
