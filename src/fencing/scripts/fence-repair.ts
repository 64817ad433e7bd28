/**
 * Repair a recovering node for some resources: raise their counters and stamp them as repaired.
 * @module
 */

import type { Script } from "../../core/scripts/script.js";
import { FENCE_LUA_PRELUDE } from "../lua.js";

/**
 * KEYS[1..4]: the fencing keys. ARGV[1]: the incarnation id the client saw in the node's
 * `NEEDS_REPAIR` answer. ARGV[2]: `m`, the highest counter of these resources read from a quorum
 * of healthy nodes *after* that answer (canonical decimal). ARGV[3..]: the resources (1 to 64).
 *
 * Returns `{status, fence, incarnation}`:
 * - `REPAIRED`: for each resource, `F := max(F, m)` and its stamp := the incarnation id;
 * - `STALE`: the node is no longer in that incarnation (it was initialised, or lost its data
 *   again and was quarantined under a new id): nothing written, because `m` was read for the
 *   earlier loss and says nothing about the later one;
 * - `NO_MARKER` / `QUARANTINED`: nothing written.
 */
export const fenceRepairScript: Script = Object.freeze({
  name: "fence-repair",
  source: `${FENCE_LUA_PRELUDE}if #ARGV < 3 then error("edge-redlock: nothing to repair") end
if not canonical(ARGV[2]) then error("edge-redlock: invalid repair fence") end
local marker = redis.call("GET", KEYS[1])
if not marker then return {"NO_MARKER", "0", ""} end
local _, current = string.match(marker, "^(%l+):(%x+)$")
if current == nil then error("edge-redlock: corrupt incarnation marker") end
if marker ~= "recovering:" .. ARGV[1] then return {"STALE", "0", current} end
if redis.call("EXISTS", KEYS[2]) == 1 then return {"QUARANTINED", "0", current} end
local floor = tonumber(ARGV[2])
for i = 3, #ARGV do
if counter(ARGV[i]) < floor then redis.call("HSET", KEYS[3], ARGV[i], ARGV[2]) end
redis.call("HSET", KEYS[4], ARGV[i], ARGV[1])
end
return {"REPAIRED", ARGV[2], current}`,
  sha1: "570dd69339ed45346fba583375689477f99cd4e2",
});
