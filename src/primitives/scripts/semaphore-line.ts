/**
 * A semaphore's line of waiters on its gate node (see `semaphore-line.ts`): one request per poll
 * keeps the waiter's place, answers its rank and which slots look free on that node.
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the semaphore's slot keys (1..k, in slot order), then the line (sorted set: waiter →
 * ticket, by arrival), the leases (sorted set: waiter → expiry in ms on the node's clock) and the
 * holds (hash: per slot `v<i>` the holder's token and `t<i>` when a poll first saw it, and `hold`,
 * the average of the holds seen end).
 * ARGV[1]: waiter id. ARGV[2]: `poll` (join the line at its end, or keep our place) or `leave`.
 * ARGV[3]: lease in ms (a waiter that does not poll again within it drops out, by the node's own
 * clock, read with `TIME`). ARGV[4]: k.
 *
 * Returns `{rank, length, slots, due}`: `rank` the waiter's place in line (0 first; -1 after
 * `leave`), `length` how many wait, `slots` one letter per slot, `h` where its key exists on this
 * node, `f` where it does not (empty after `leave`), and `due` per slot, comma-separated, in ms from
 * now, when its holder should let go: when a poll first saw that holder plus the average hold, 0
 * for a free slot or an overdue holder, -1 while no hold has been seen end (empty after `leave`).
 * The polls are the gate's only view of the slots: a hold is counted from the first poll that saw
 * its holder to the first that saw the slot free, which the many polls of a busy line keep close to
 * the truth. A ticket is one more than the last in line, so tickets only grow while anyone waits;
 * the keys live a second longer than the longest lease given (the holds, 10 minutes).
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
return {-1, redis.call("ZCARD", line), "", ""}
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
local holds = KEYS[k + 3]
local hold = tonumber(redis.call("HGET", holds, "hold") or "-1")
local slots, due = {}, {}
for i = 1, k do
local v = redis.pcall("GET", KEYS[i])
if type(v) == "table" then
v = "?"
end
local seen = redis.call("HGET", holds, "v" .. i)
if v then
slots[i] = "h"
local at = now
if seen == v then
at = tonumber(redis.call("HGET", holds, "t" .. i))
else
redis.call("HSET", holds, "v" .. i, v, "t" .. i, now)
end
if hold >= 0 then
due[i] = math.max(0, at + hold - now)
else
due[i] = -1
end
else
slots[i] = "f"
due[i] = 0
if seen then
local held = now - tonumber(redis.call("HGET", holds, "t" .. i))
if hold >= 0 then
hold = math.floor((3 * hold + held) / 4)
else
hold = held
end
redis.call("HSET", holds, "hold", hold)
redis.call("HDEL", holds, "v" .. i, "t" .. i)
end
end
end
redis.call("PEXPIRE", holds, 600000)
return {redis.call("ZRANK", line, waiter), redis.call("ZCARD", line), table.concat(slots), table.concat(due, ",")}`,
  sha1: "b6a90c728a2c77c4ee9f6c25fff6a40e900a4cfe",
});
