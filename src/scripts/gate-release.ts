/**
 * Release on a resource set's gate node: compare-and-DEL like the plain release script, and tell
 * the releasing client how many waiters are in line, so that its next acquisition of the same
 * resource queues up behind them instead of jumping the line.
 * @module
 */
import type { Script } from "./script.js";

/**
 * KEYS: the lock keys (1..n), then the gate's queue, leases and stats keys. ARGV[1]: token.
 * ARGV[2]: n. Returns `{deleted, waiting}`: how many keys were deleted, and how many waiters hold
 * a lease. A release that deleted our keys after a take through the gate records how long the
 * hold lasted (an average), from which the gate predicts the next release.
 */
export const gateReleaseScript: Script = Object.freeze({
  name: "gate-release",
  source: `local n = tonumber(ARGV[2])
local deleted = 0
for i = 1, n do
  if redis.call("GET", KEYS[i]) == ARGV[1] then
    deleted = deleted + redis.call("DEL", KEYS[i])
  end
end
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local stats = KEYS[n + 3]
local last = tonumber(redis.call("HGET", stats, "last") or "0")
if deleted > 0 and last > 0 and redis.call("HGET", stats, "holder") == ARGV[1] then
  local held = now - last
  local hold = tonumber(redis.call("HGET", stats, "hold") or "0")
  if hold == 0 then
    hold = held
  else
    hold = math.floor((3 * hold + held) / 4)
  end
  redis.call("HSET", stats, "hold", hold, "released", now)
end
return {deleted, redis.call("ZCOUNT", KEYS[n + 2], now, "+inf")}`,
  sha1: "72249b5ebb32edc27d64d1679e4652488c445461",
});
