/**
 * A semaphore's line of waiters on its gate node (see `semaphore-line.ts`): one request per poll
 * keeps the waiter's place, answers its rank and which slots look free on that node.
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the semaphore's slot keys (1..k, in slot order), then the line (sorted set: waiter →
 * ticket, by arrival) and the leases (sorted set: waiter → expiry in ms on the node's clock).
 * ARGV[1]: waiter id. ARGV[2]: `poll` (join the line at its end, or keep our place) or `leave`.
 * ARGV[3]: lease in ms (a waiter that does not poll again within it drops out, by the node's own
 * clock, read with `TIME`). ARGV[4]: k.
 *
 * Returns `{rank, length, slots}`: `rank` the waiter's place in line (0 first; -1 after `leave`),
 * `length` how many wait, `slots` one letter per slot, `h` where its key exists on this node, `f`
 * where it does not (empty after `leave`). A ticket is one more than the last in line, so tickets
 * only grow while anyone waits; the keys live a second longer than the longest lease given.
 */
export const semaphoreLineScript: Script = /* @__PURE__ */ Object.freeze({
  name: "semaphore-line",
  source: `local k = tonumber(ARGV[4])
local line, leases = KEYS[k + 1], KEYS[k + 2]
local waiter = ARGV[1]
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local stale = redis.call("ZRANGEBYSCORE", leases, "-inf", now)
for _, w in ipairs(stale) do
redis.call("ZREM", line, w)
end
redis.call("ZREMRANGEBYSCORE", leases, "-inf", now)
if ARGV[2] == "leave" then
redis.call("ZREM", line, waiter)
redis.call("ZREM", leases, waiter)
return {-1, redis.call("ZCARD", line), ""}
end
if not redis.call("ZSCORE", line, waiter) then
local last = redis.call("ZRANGE", line, -1, -1, "WITHSCORES")
local ticket = 1
if last[2] then
ticket = tonumber(last[2]) + 1
end
redis.call("ZADD", line, ticket, waiter)
end
local lease = tonumber(ARGV[3])
redis.call("ZADD", leases, now + lease, waiter)
for _, key in ipairs({line, leases}) do
if redis.call("PTTL", key) < lease + 1000 then
redis.call("PEXPIRE", key, lease + 1000)
end
end
local slots = {}
for i = 1, k do
if redis.call("EXISTS", KEYS[i]) == 1 then
slots[i] = "h"
else
slots[i] = "f"
end
end
return {redis.call("ZRANK", line, waiter), redis.call("ZCARD", line), table.concat(slots)}`,
  sha1: "7807bc2347106379376c0195a273fca8b2c064f2",
});
