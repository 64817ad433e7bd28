/**
 * Release a lock on one node and, in the same step, take it for the next holder: a release from
 * an isolate whose next waiter is known hands the lock over without a round trip of its own (see
 * `handoff.ts`).
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the lock's keys. ARGV[1]: the releasing token. ARGV[2]: the next holder's token. ARGV[3]:
 * its TTL in ms. Compare-and-DEL as the release script does, then, when every key is free, sets
 * them all with the next token (the all-or-none acquire): a key that expired and was taken by
 * someone else is left alone, and the next holder gets nothing on this node. Returns
 * `{deleted, taken}`: how many keys were deleted, and 1 when the next holder now holds them all.
 */
export const handOverScript: Script = Object.freeze({
  name: "hand-over",
  source: `local deleted = 0
for _, key in ipairs(KEYS) do
if redis.call("GET", key) == ARGV[1] then
deleted = deleted + redis.call("DEL", key)
end
end
for _, key in ipairs(KEYS) do
if redis.call("EXISTS", key) == 1 then
return {deleted, 0}
end
end
for _, key in ipairs(KEYS) do
redis.call("SET", key, ARGV[2], "PX", ARGV[3])
end
return {deleted, 1}`,
  sha1: "4fed1981faad764b4d7e051e71f1b697ab444115",
});
