/**
 * Quarantine a node found without its incarnation marker (it restarted empty, or lost the key).
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS[1]: the incarnation marker; KEYS[2]: the quarantine key. ARGV[1]: a fresh incarnation id
 * (hex). ARGV[2]: the quarantine length in ms.
 *
 * Returns `{status, fence, incarnation}`:
 * - `QUARANTINED`: the marker was absent; now `incarnation = recovering:<id>` and the quarantine
 *   key lives for ARGV[2] ms;
 * - `PRESENT`: the node has a marker (someone quarantined or initialised it first): nothing written.
 *
 * Atomic on the node, so two clients that detect the same loss cannot both start a quarantine,
 * and one that detects it late never restarts or shortens one.
 */
export const fenceQuarantineScript: Script = Object.freeze({
  name: "fence-quarantine",
  source: `if not string.match(ARGV[1], "^%x+$") then error("edge-redlock: invalid incarnation id") end
local marker = redis.call("GET", KEYS[1])
if marker then
local _, id = string.match(marker, "^(%l+):(%x+)$")
return {"PRESENT", "0", id or ""}
end
redis.call("SET", KEYS[1], "recovering:" .. ARGV[1])
redis.call("SET", KEYS[2], ARGV[1], "PX", ARGV[2])
return {"QUARANTINED", "0", ARGV[1]}`,
  sha1: "3760773f7562dd72fb0984bbb2cb55aed5d6d67d",
});
