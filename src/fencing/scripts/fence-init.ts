/**
 * Mark a fresh node as initialised for fencing (the explicit one-time initialisation).
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS[1]: the incarnation marker. ARGV[1]: a fresh incarnation id (hex).
 *
 * Returns `{status, fence, incarnation}`: `INITIALIZED` when the marker was absent (now
 * `ok:<id>`), `PRESENT` when it already exists (nothing written). Only ever run by
 * `initializeFencing`, after it found every node reachable and none with a marker.
 */
export const fenceInitScript: Script = Object.freeze({
  name: "fence-init",
  source: `if not string.match(ARGV[1], "^%x+$") then error("edge-redlock: invalid incarnation id") end
local marker = redis.call("GET", KEYS[1])
if marker then
local _, id = string.match(marker, "^(%l+):(%x+)$")
return {"PRESENT", "0", id or ""}
end
redis.call("SET", KEYS[1], "ok:" .. ARGV[1])
return {"INITIALIZED", "0", ARGV[1]}`,
  sha1: "9ffb7c0228cfb93b0cf3a4b4a5cf4733bd01c1ac",
});
