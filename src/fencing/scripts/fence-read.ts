/**
 * Read the fence counters of some resources on one node, if the node is healthy for them.
 * @module
 */

import type { Script } from "../../core/scripts/script.js";
import { FENCE_LUA_PRELUDE } from "../lua.js";

/**
 * KEYS[1..4]: the fencing keys. ARGV: the resources (0 to 64; with none it only reports whether
 * the node has an incarnation marker and is out of quarantine).
 *
 * Returns `{status, fence, incarnation}`: `OK` with the highest counter of the resources, or
 * `NO_MARKER` / `QUARANTINED` / `NEEDS_REPAIR` with "0". Writes nothing. Used for the read that
 * feeds a repair, and by the one-time initialisation to probe every node.
 */
export const fenceReadScript: Script = Object.freeze({
  name: "fence-read",
  source: `${FENCE_LUA_PRELUDE}local status, id = health(ARGV)
if status ~= "OK" then return {status, "0", id} end
local _, fence = highest(ARGV)
return {"OK", fence, id}`,
  sha1: "67e7cf76921f53f22e9b95e9b89e7128b27cf628",
});
