/**
 * Fencing phase 1 on one node: take the lock's keys (all or none) and read the fence counters.
 * @module
 */

import type { Script } from "../../core/scripts/script.js";
import { FENCE_LUA_PRELUDE } from "../lua.js";

/**
 * KEYS[1..4]: the fencing keys; KEYS[5..]: the lock's keys (1 to 64). ARGV[1]: the lock token.
 * ARGV[2]: TTL in ms. ARGV[3..]: the resources, one per lock key (the counters' fields).
 *
 * Returns `{status, fence, incarnation}`:
 * - `OK`: every lock key now holds the token (set with PX ttl, or already ours: a retry of our own
 *   request is answered the same way and re-arms the TTL), and `fence` is the highest counter of
 *   the lock's resources;
 * - `BUSY`: some key holds another token; nothing written, `fence` still read (it may raise `t`);
 * - `NO_MARKER` / `QUARANTINED` / `NEEDS_REPAIR`: the node may not take part (see the prelude);
 *   nothing written, `fence` is "0" and must not be used.
 *
 * The health check comes first and runs in the same atomic step as the SET, so a node that lost
 * its data never grants a fenced lock before it was quarantined and repaired.
 */
export const fenceAcquireScript: Script = Object.freeze({
  name: "fence-acquire",
  source: `${FENCE_LUA_PRELUDE}local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
if #fields == 0 or #fields ~= #KEYS - 4 then error("edge-redlock: lock keys and resources do not match") end
local status, id = health(fields)
if status ~= "OK" then return {status, "0", id} end
local _, fence = highest(fields)
for i = 5, #KEYS do
local holder = redis.call("GET", KEYS[i])
if holder and holder ~= ARGV[1] then return {"BUSY", fence, id} end
end
for i = 5, #KEYS do
redis.call("SET", KEYS[i], ARGV[1], "PX", ARGV[2])
end
return {"OK", fence, id}`,
  sha1: "b5cf2cd36f3cb1ac67b52af334049fa78932a52c",
});
