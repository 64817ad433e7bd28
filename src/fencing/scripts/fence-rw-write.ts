/**
 * Fencing phase 1 of a read-write lock's write lock on one node: the health check and the counter
 * read of `fence-acquire`, then the write lock's own step (`rw-write`), in one atomic script.
 * @module
 */

import type { Script } from "../../core/scripts/script.js";
import { FENCE_LUA_PRELUDE } from "../lua.js";

/**
 * KEYS[1..4]: the fencing keys; KEYS[5]: the write key; KEYS[6]: the readers' sorted set; KEYS[7]:
 * the writer-waiting mark. ARGV[1]: the lock token. ARGV[2]: TTL in ms. ARGV[3]: the waiting
 * writer's id. ARGV[4]: the mark's TTL in ms ("0": leave no mark). ARGV[5]: the counter's field
 * (the write key without its `keyPrefix`, in the reserved namespace, so no mutex resource has it).
 *
 * Returns `{status, fence, incarnation}`:
 * - `OK`: the write key now holds the token (set with PX ttl, or already ours: a retry of our own
 *   request re-arms it), the writer's own mark is cleared, and `fence` is the field's counter;
 * - `BUSY`: another writer holds the key or a reader's entry is live on the node's clock; the
 *   writer's mark is set (unless ARGV[4] is "0"), nothing else written; `fence` still read;
 * - `NO_MARKER` / `QUARANTINED` / `NEEDS_REPAIR`: the node may not take part; nothing written.
 *
 * The health check runs first, in the same atomic step as the SET, as in `fence-acquire`: a node
 * that lost its data never grants a fenced write lock before it was quarantined and repaired.
 */
export const fenceRwWriteScript: Script = Object.freeze({
  name: "fence-rw-write",
  source: `${FENCE_LUA_PRELUDE}if #KEYS ~= 7 or #ARGV ~= 5 or ARGV[5] == "" then error("edge-redlock: bad fenced write lock call") end
local status, id = health({ARGV[5]})
if status ~= "OK" then return {status, "0", id} end
local _, fence = counter(ARGV[5])
local time = redis.call("TIME")
redis.call("ZREMRANGEBYSCORE", KEYS[6], "-inf", tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))
local holder = redis.call("GET", KEYS[5])
if (holder and holder ~= ARGV[1]) or redis.call("EXISTS", KEYS[6]) == 1 then
if ARGV[4] ~= "0" then redis.call("SET", KEYS[7], ARGV[3], "PX", ARGV[4]) end
return {"BUSY", fence, id}
end
redis.call("SET", KEYS[5], ARGV[1], "PX", ARGV[2])
if redis.call("GET", KEYS[7]) == ARGV[3] then redis.call("DEL", KEYS[7]) end
return {"OK", fence, id}`,
  sha1: "7d23553ac17175a0a268af03fa5e4e3c1bbfc79f",
});
