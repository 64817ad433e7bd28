/**
 * Release on a resource set's gate node: compare-and-DEL like the plain release script, and tell
 * the releasing client how many waiters are in line, so that its next acquisition of the same
 * resource queues up behind them instead of jumping the line.
 * @module
 */
import type { Script } from "./script.js";

/**
 * KEYS: the lock keys (1..n), then the gate's queue, leases and stats keys. ARGV[1]: token.
 * ARGV[2]: n. ARGV[3]: the TTL the keys were last set with (acquired or extended). Returns
 * `{deleted, waiting}`: how many keys were deleted, and how many waiters hold a lease. A release
 * that deleted our keys records how long the hold lasted (the TTL less the key's PTTL: an average
 * over releases), from which the gate predicts the next release, whoever took the lock and how.
 */
export const gateReleaseScript: Script = Object.freeze({
  name: "gate-release",
  source: `local n = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local left = redis.call("PTTL", KEYS[1])
local deleted = 0
for i = 1, n do
  if redis.call("GET", KEYS[i]) == ARGV[1] then
    deleted = deleted + redis.call("DEL", KEYS[i])
  end
end
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local stats = KEYS[n + 3]
if deleted > 0 and left > 0 and left <= ttl then
  local held = ttl - left
  local hold = tonumber(redis.call("HGET", stats, "hold") or "0")
  if hold == 0 then
    hold = held
  else
    hold = math.floor((3 * hold + held) / 4)
  end
  redis.call("HSET", stats, "hold", hold, "ttl", ttl, "released", now)
  redis.call("PEXPIRE", stats, 600000)
end
return {deleted, redis.call("ZCOUNT", KEYS[n + 2], now, "+inf")}`,
  sha1: "ec2f72473ffaeede7a8e0c3b0fbf9c0107bb8ed9",
});
