/**
 * Release on a resource set's gate node: compare-and-DEL like the plain release script, and tell
 * the releasing client how many waiters are in line, so that its next acquisition of the same
 * resource queues up behind them instead of jumping the line. A release that hands the lock over
 * to a waiter of its own isolate (see `handoff.ts`) also takes the lock for it here, as its take
 * at the gate would have.
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the lock keys (1..n), then the gate's queue, leases and stats keys. ARGV[1]: token.
 * ARGV[2]: n. ARGV[3]: the TTL the keys were last set with (acquired or extended). ARGV[4]: a
 * waiter id to put at the back of the line when others are waiting (the releasing client expects
 * to come back for the lock), or "" for none. ARGV[5]: that entry's lease in ms. ARGV[6]: how long
 * before the lock was granted the gate's key was already the holder's, beyond the grant's round
 * trip (see "how long the hold lasted" below), 0 for none. ARGV[7]: the token of a waiter to hand
 * the lock over to, or "" for none; ARGV[8]: its TTL in ms; ARGV[9]: its id in the queue;
 * ARGV[10]: how long its isolate holds the lock, as the gate's ARGV[8] of a take. Returns
 * `{deleted, waiting, ticket, hold, dev, cycle, turns, handed, head, held}`: how many keys were deleted, how
 * many waiters hold a lease (ahead of the new entry; a waiter handed the lock no longer counts,
 * but its wait still makes the lock contended, for the new entry and the line's pace), the
 * new entry's ticket (0 when none was made), the gate's figures as the poll script returns them,
 * 1 when the lock keys were handed over, and, after a release, the ticket of the waiter now first
 * in line (0 for none): a waiter of the releasing isolate learns its turn without a poll; and the
 * hold that ended as the gate measured it, in ms (0 when it taught the gate nothing), which the
 * releasing isolate averages and tells the gate with its next take.
 *
 * The hand-over takes the keys as the poll script's take would, with the same conditions: every
 * key free (after our delete), and the waiter first in line (or the line empty). It is recorded
 * as a take aimed at the release: the next hold is learned from it, without a lead.
 *
 * A release that deleted our keys notes the time, counts a turn (waiters see the line move by
 * it), and measures the interval since the previous release with waiters in line (the line's
 * pace, from which waiters far back know when to look again). It does so only where a line is or
 * was (the stats exist, or a waiter holds a lease): an uncontended lock leaves nothing behind on
 * the gate, where a record kept for ten minutes per key ever released would add up to megabytes
 * for a lock per user or per request. When the hold began with a take at the gate, it also
 * records how long the hold lasted: the time since that take (the TTL less the key's PTTL counts
 * only from the last extension), averaged over releases, with the average deviation, from which
 * the gate predicts the next release. A plain fan-out teaches nothing: its start may lie anywhere
 * in a burst of contenders. A take aimed at the release asks the other nodes in the same round
 * trip, and waiters plan by holds of that kind; a take by a poll is followed by a round trip to
 * the other nodes, which the holder measures and the gate takes off (ARGV[6]; the gate also keeps
 * an average of these leads, to predict the release of a holder that took by a poll). Taught as they
 * came, those holds were a round trip longer: the first hold of a line, always taken by a poll,
 * set the first aims a round trip late, and every later take by a poll (after an aim that came
 * early) moved the average up for several turns. The average follows shorter holds faster than
 * longer ones: a waiter that plans by an average too long arrives late, where one too short only
 * wastes a fan-out.
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
local waiting = redis.call("ZCOUNT", KEYS[n + 2], now, "+inf")
local hold = tonumber(redis.call("HGET", stats, "hold") or "0")
local held = ttl - left
local took = tonumber(redis.call("HGET", stats, "took") or "0")
if took > 0 and now - took > held then
held = now - took
end
local lead = tonumber(ARGV[6]) or 0
if lead > 0 and lead < held then
held = held - lead
end
local learned = 0
if deleted > 0 and left > 0 and left <= ttl and redis.call("HGET", stats, "taker") == ARGV[1] then
learned = held
local dev = tonumber(redis.call("HGET", stats, "dev") or "0")
if hold == 0 then
hold = held
dev = 0
else
dev = math.floor((3 * dev + math.abs(held - hold)) / 4)
if held < hold then
hold = math.floor((hold + held) / 2)
else
hold = math.floor((3 * hold + held) / 4)
end
end
redis.call("HSET", stats, "hold", hold, "dev", dev, "ttl", ttl)
if lead > 0 then
local average = tonumber(redis.call("HGET", stats, "lead") or "0")
if average > 0 then
lead = math.floor((3 * average + lead) / 4)
end
redis.call("HSET", stats, "lead", lead)
end
end
if deleted > 0 and (waiting > 0 or redis.call("EXISTS", stats) == 1) then
local cycle = tonumber(redis.call("HGET", stats, "cycle") or "0")
local contended = tonumber(redis.call("HGET", stats, "contended") or "0")
if contended > 0 and now > contended then
if cycle == 0 then
cycle = now - contended
else
cycle = math.floor((3 * cycle + now - contended) / 4)
end
end
if waiting == 0 then
contended = 0
else
contended = now
end
redis.call("HSET", stats, "released", now, "cycle", cycle, "contended", contended)
redis.call("HINCRBY", stats, "turns", 1)
redis.call("PEXPIRE", stats, 600000)
end
local handed = 0
local ahead = waiting
if ARGV[7] and ARGV[7] ~= "" then
local stale = redis.call("ZRANGEBYSCORE", KEYS[n + 2], "-inf", now)
for _, w in ipairs(stale) do
redis.call("ZREM", KEYS[n + 1], w)
end
redis.call("ZREMRANGEBYSCORE", KEYS[n + 2], "-inf", now)
local rank = redis.call("ZRANK", KEYS[n + 1], ARGV[9])
local free = rank == 0 or (not rank and redis.call("ZCARD", KEYS[n + 1]) == 0)
for i = 1, n do
if free and redis.call("EXISTS", KEYS[i]) == 1 then
free = false
end
end
if free then
for i = 1, n do
redis.call("SET", KEYS[i], ARGV[7], "PX", ARGV[8])
end
redis.call("ZREM", KEYS[n + 1], ARGV[9])
redis.call("ZREM", KEYS[n + 2], ARGV[9])
redis.call("HSET", stats, "released", 0, "taker", ARGV[7], "took", now, "unreleased", 0, "polled", 0, "expect", tonumber(ARGV[10]) or 0, "expecter", ARGV[7])
redis.call("PEXPIRE", stats, 600000)
handed = 1
if rank then
ahead = waiting - 1
end
end
end
local ticket = 0
if deleted > 0 and waiting > 0 and ARGV[4] and ARGV[4] ~= "" then
ticket = redis.call("HINCRBY", stats, "seq", 1)
redis.call("ZADD", KEYS[n + 1], ticket, ARGV[4])
redis.call("ZADD", KEYS[n + 2], now + tonumber(ARGV[5]), ARGV[4])
local keep = tonumber(ARGV[5]) + 1000
for _, key in ipairs({KEYS[n + 1], KEYS[n + 2]}) do
if redis.call("PTTL", key) < keep then
redis.call("PEXPIRE", key, keep)
end
end
end
local head = 0
if deleted > 0 then
local first = redis.call("ZRANGE", KEYS[n + 1], 0, 0, "WITHSCORES")
if first[1] and tonumber(redis.call("ZSCORE", KEYS[n + 2], first[1]) or "0") > now then
head = tonumber(first[2])
end
end
local function stat(field)
return tonumber(redis.call("HGET", stats, field) or "0")
end
return {deleted, ahead, ticket, stat("hold"), stat("dev"), stat("cycle"), stat("turns"), handed, head, learned}`,
  sha1: "2177385c51d9354422babd6387028ab6ca912556",
});
