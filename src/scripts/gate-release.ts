/**
 * Release on a resource set's gate node: compare-and-DEL like the plain release script, and tell
 * the releasing client how many waiters are in line, so that its next acquisition of the same
 * resource queues up behind them instead of jumping the line.
 * @module
 */
import type { Script } from "./script.js";

/**
 * KEYS: the lock keys (1..n), then the gate's queue and leases keys. ARGV[1]: token. ARGV[2]: n.
 * Returns `{deleted, waiting}`: how many keys were deleted, and how many waiters hold a lease.
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
return {deleted, redis.call("ZCOUNT", KEYS[n + 2], now, "+inf")}`,
  sha1: "bfb097d3bd7ce2a6c3afe988a5677ffa5fe72934",
});
