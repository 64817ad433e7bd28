/**
 * The gate: one node per resource set that orders waiters, so that waiting costs one request per
 * poll instead of a fan-out to every node, waiters do not split the votes, and nobody starves.
 * Safety never depends on it: a lock still needs a quorum of `SET NX` (or the all-or-none
 * script) with enough validity, exactly as without a gate.
 *
 * State on the gate node, besides the lock keys: a queue (sorted set: ticket → waiter), the
 * waiters' leases (sorted set: lease expiry → waiter; a waiter that stops polling drops out when
 * its lease runs out), and a small hash: the ticket counter, the last taker's token and how it
 * took the lock, and what `gate-release.ts` records (the time of the last release, a count of
 * releases, the interval between releases under contention, an average of how long a hold lasts
 * with its average deviation, with the TTL in use, and an average of the leads takes by a poll
 * had), from which waiters predict when the lock frees up: the current holder has held it for the
 * TTL less its key's PTTL, or, when it took the lock at the gate, since that take (an extension
 * resets the PTTL, not the hold). A holder that took at the gate and told how long its isolate's
 * holds last is predicted by its own figure rather than the line's average (the figure is kept
 * with the token that told it: a take by a client that tells none, of an earlier version, is
 * predicted by the average, not by its predecessor's figure): where isolates hold
 * for different times (their distance to the data their critical section reads, say), the
 * average is wrong for every one of them, and an aim set by it lands early or late by the
 * difference. Holds are learned as if the take had been aimed at the release
 * (see `gate-release.ts`); a holder that took by a poll had the lock a lead after its take, and is
 * predicted to let go that much later (planned by the aimed hold, the next take would land before
 * such a release, and a take that lands early costs a fan-out of N requests). A take that
 * found the keys free with no release since the take before (a placeholder or a lock that ran out)
 * is no hold to predict: most likely the gate is out of step and its taker is about to leave a
 * placeholder, so polls answer as if the prediction had passed (waiters poll patiently instead of
 * aiming takes at it).
 * The first in line has the lock to itself once it is free; if it has not come for it after half
 * a hold (20 ms at least), whoever polls first takes it, so a waiter that oversleeps stalls no one.
 * The half hold counts from the release, or from the time the gate last told the first in line
 * the lock would free up (`due`, kept from its poll until the next take) when that is later: the
 * first in line aims its take there, a fan-out whose other nodes are asked at once, and a release
 * that came early would otherwise let a poll behind it take the gate while that take is on its
 * way, splitting the nodes between them (the take that lost the gate then wins the others, and
 * the one that took it asks them again and cleans up: a dozen requests of its budget). The time
 * told is a prediction from a hold, so this keeps a free lock at most about a hold longer.
 * When the lock came free without a release through the gate (a placeholder that ran out, a lock
 * that expired or was released elsewhere), the half hold counts from a whole hold after the last
 * take: counted from the last release only, a place nobody came back for stood at the head until
 * its lease ran out. With no hold to count by (a line's first contention, the lock won around the
 * gate), it counts from the first poll that found the lock free (`seen` in the stats, cleared by a
 * take and by a poll that finds the lock held), so that a first in line asleep for seconds (its
 * budget's spacing) does not keep a free lock from the whole line until it comes.
 * A poll that finds the lock keys partly held (some set, some free) has met another resource set
 * that shares keys with ours: its releases never pass through this gate. The gate notes the time,
 * and for the next 2 s every poll answers `contested`, so that this set's waiters wait with
 * fan-outs instead of standing in a line that cannot see the other set's turns.
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the lock keys (1..n), then the queue, the leases and the stats keys.
 * ARGV[1]: waiter id. ARGV[2]: mode, `take` (enqueue, or take the lock keys when this waiter is
 * first in line, or the queue is empty, and the keys are free), `aim` (the same, as part of a
 * fan-out aimed at the predicted release: the other nodes are asked in the same round trip),
 * `wait` (enqueue, never take) or
 * `leave` (drop out of the queue, and delete the lock keys if they hold ARGV[3]: a waiter that
 * gives up takes its placeholder with it). ARGV[3]: token. ARGV[4]: TTL in ms. ARGV[5]: lease in ms.
 * ARGV[6]: n, the number of lock keys. ARGV[7]: the waiter's earlier ticket, or 0 for none (a
 * waiter whose take failed elsewhere keeps its place). ARGV[8]: for a take, how long the taker's
 * isolate holds the lock, as the gate measured its earlier holds (see `gate-release.ts`), or 0
 * when unknown.
 *
 * Returns `{taken, rank, pttl, freeIn, hold, ticket, dev, cycle, turns, contested, unreleased}`: `taken` 1
 * when the keys were set; `rank` the waiter's place in line (0 first); `pttl` the longest PTTL of
 * the lock keys (-2 when free); `freeIn` the predicted milliseconds until the lock frees up (bounded by `pttl`; `pttl` itself
 * when no hold was recorded yet; after a take, instead, how long ago the previous holder released
 * through the gate, -1 when the keys were free without a recorded release); `hold` the average
 * hold in ms (0 while unknown); `ticket` the waiter's ticket; `dev` the average deviation of a hold
 * from `hold`; `cycle` the average interval between two releases with waiters in line (0 while
 * unknown); `turns` how many releases the gate has seen (the line moves when it grows);
 * `contested` 1 when a poll found the lock keys partly held within the last 2 s (0 after a take);
 * `unreleased`, after a take, how many takes in a row (this one included) found the keys free
 * with no release through the gate since the take before (a placeholder or a lock that ran out),
 * 0 otherwise.
 */
export const gateScript: Script = Object.freeze({
  name: "gate",
  source: `local n = tonumber(ARGV[6])
local queue, leases, stats = KEYS[n + 1], KEYS[n + 2], KEYS[n + 3]
local waiter, mode = ARGV[1], ARGV[2]
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local stale = redis.call("ZRANGEBYSCORE", leases, "-inf", now)
for _, w in ipairs(stale) do
redis.call("ZREM", queue, w)
end
redis.call("ZREMRANGEBYSCORE", leases, "-inf", now)
if mode == "leave" then
redis.call("ZREM", queue, waiter)
redis.call("ZREM", leases, waiter)
for i = 1, n do
if redis.call("GET", KEYS[i]) == ARGV[3] then
redis.call("DEL", KEYS[i])
end
end
return {0, -1, -2, 0, 0, 0, 0, 0, 0, 0, 0}
end
local pttl = -2
local held = 0
for i = 1, n do
local p = redis.call("PTTL", KEYS[i])
if p ~= -2 then
held = held + 1
if p == -1 or p > pttl then
pttl = p
end
end
end
local contested = 0
local foreign = tonumber(redis.call("HGET", stats, "foreign") or "0")
if held > 0 and held < n then
foreign = now
redis.call("HSET", stats, "foreign", now)
redis.call("PEXPIRE", stats, 600000)
end
if foreign > 0 and now - foreign < 2000 then
contested = 1
end
local hold = tonumber(redis.call("HGET", stats, "hold") or "0")
local ttl = tonumber(redis.call("HGET", stats, "ttl") or "0")
local released = tonumber(redis.call("HGET", stats, "released") or "0")
local dev = tonumber(redis.call("HGET", stats, "dev") or "0")
local cycle = tonumber(redis.call("HGET", stats, "cycle") or "0")
local turns = tonumber(redis.call("HGET", stats, "turns") or "0")
local unreleased = tonumber(redis.call("HGET", stats, "unreleased") or "0")
local ticket = tonumber(redis.call("ZSCORE", queue, waiter) or "0")
if ticket == 0 then
ticket = tonumber(ARGV[7])
if ticket <= 0 then
ticket = redis.call("HINCRBY", stats, "seq", 1)
redis.call("PEXPIRE", stats, 600000)
end
redis.call("ZADD", queue, ticket, waiter)
end
local rank = redis.call("ZRANK", queue, waiter)
local took = tonumber(redis.call("HGET", stats, "took") or "0")
local freed = released
if freed == 0 and took > 0 and hold > 0 then
freed = took + hold
end
local seen = tonumber(redis.call("HGET", stats, "seen") or "0")
if freed == 0 and pttl == -2 then
if seen == 0 then
seen = now
redis.call("HSET", stats, "seen", now)
redis.call("PEXPIRE", stats, 600000)
end
freed = seen
elseif seen > 0 and pttl ~= -2 then
redis.call("HSET", stats, "seen", 0)
end
local due = tonumber(redis.call("HGET", stats, "due") or "0")
if due > freed then
freed = due
end
local late = freed > 0 and now - freed > math.max(20, math.floor(hold / 2))
if (mode == "take" or mode == "aim") and pttl == -2 and (rank == 0 or late) then
for i = 1, n do
redis.call("SET", KEYS[i], ARGV[3], "PX", ARGV[4])
end
redis.call("ZREM", queue, waiter)
redis.call("ZREM", leases, waiter)
local ago = -1
if released > 0 then
ago = now - released
end
local streak = 0
if released == 0 and took > 0 then
streak = unreleased + 1
end
local polled = 1
if mode == "aim" then
polled = 0
end
redis.call("HSET", stats, "released", 0, "seen", 0, "due", 0, "taker", ARGV[3], "took", now, "unreleased", streak, "polled", polled, "expect", tonumber(ARGV[8]) or 0, "expecter", ARGV[3])
redis.call("PEXPIRE", stats, 600000)
return {1, 0, -2, ago, hold, ticket, dev, cycle, turns, 0, streak}
end
redis.call("ZADD", leases, now + tonumber(ARGV[5]), waiter)
local keep = tonumber(ARGV[5]) + 1000
for _, key in ipairs({queue, leases}) do
if redis.call("PTTL", key) < keep then
redis.call("PEXPIRE", key, keep)
end
end
local freeIn = 0
if pttl ~= -2 then
freeIn = pttl
local elapsed = -1
if ttl > 0 and pttl <= ttl then
elapsed = ttl - pttl
end
local taker = redis.call("HGET", stats, "taker")
local byTaker = took > 0 and redis.call("GET", KEYS[1]) == taker
if byTaker and now - took > elapsed then
elapsed = now - took
end
if hold > 0 and pttl > 0 and elapsed >= 0 then
local expect = 0
if byTaker and redis.call("HGET", stats, "expecter") == taker then
expect = tonumber(redis.call("HGET", stats, "expect") or "0")
end
if expect <= 0 then
expect = hold
end
local predicted = expect - elapsed
if byTaker and redis.call("HGET", stats, "polled") == "1" then
predicted = predicted + tonumber(redis.call("HGET", stats, "lead") or "0")
end
if predicted < 0 or (byTaker and unreleased > 0) then
predicted = 0
end
if predicted < pttl then
freeIn = predicted
if rank == 0 and predicted > 0 then
redis.call("HSET", stats, "due", now + predicted)
end
end
end
end
return {0, rank, pttl, freeIn, hold, ticket, dev, cycle, turns, contested, 0}`,
  sha1: "3eaea63f98f5b9a8bf013c114e8653b0269bf7a7",
});
