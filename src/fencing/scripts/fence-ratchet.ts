/**
 * Fencing phase 2 on one node: the ownership-checked compare-and-set ratchet of the counters.
 * @module
 */

import type { Script } from "../../core/scripts/script.js";
import { FENCE_LUA_PRELUDE } from "../lua.js";

/**
 * KEYS[1..4]: the fencing keys; KEYS[5..]: the lock's keys. ARGV[1]: the lock token. ARGV[2]: the
 * proposed fence `t` (canonical decimal). ARGV[3..]: the resources, one per lock key.
 *
 * Returns `{status, fence, incarnation}`:
 * - `ACK`: the node is healthy for these resources, every lock key holds our token and every
 *   counter was below `t`; all of them are now `t` (`fence` = `t`);
 * - `NACK`: some counter is already ≥ `t`; nothing written; `fence` is the highest counter;
 * - `LOST`: some lock key no longer holds our token; nothing written;
 * - `NO_MARKER` / `QUARANTINED` / `NEEDS_REPAIR`: nothing written.
 *
 * Why each check (the arguments are in `src/fencing/attempt.ts`):
 * - `F < t` strictly: a node acknowledges any given value at most once, which is what makes two
 *   grants with the same token impossible (uniqueness needs no timing).
 * - the ownership check bounds *when* a grant's writes can still land: never after its lock key
 *   expired on that node. The quarantine-and-repair argument for lost nodes relies on it.
 * - the health check: a lost or unrepaired node never acknowledges.
 */
export const fenceRatchetScript: Script = Object.freeze({
  name: "fence-ratchet",
  source: `${FENCE_LUA_PRELUDE}local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
if #fields == 0 or #fields ~= #KEYS - 4 then error("edge-redlock: lock keys and resources do not match") end
if not canonical(ARGV[2]) or ARGV[2] == "0" then error("edge-redlock: invalid proposed fence") end
local status, id = health(fields)
if status ~= "OK" then return {status, "0", id} end
local best, fence = highest(fields)
for i = 5, #KEYS do
if redis.call("GET", KEYS[i]) ~= ARGV[1] then return {"LOST", fence, id} end
end
if best >= tonumber(ARGV[2]) then return {"NACK", fence, id} end
for _, field in ipairs(fields) do
redis.call("HSET", KEYS[3], field, ARGV[2])
end
return {"ACK", ARGV[2], id}`,
  sha1: "2b89fa292f726c0e1aebd4623f2d9341952faa08",
});
