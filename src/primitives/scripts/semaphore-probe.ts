/**
 * A semaphore's free slots on one node, in one request: which of its slot keys exist. A waiter
 * reads one node with it instead of trying slot after slot on every node (see `semaphore.ts`).
 * @module
 */
import type { Script } from "../../core/scripts/script.js";

/**
 * KEYS: the semaphore's slot keys, in slot order. Returns a string of one letter per slot: `h`
 * where its key exists (the slot is held), `f` where it is free (letters, so that no layer takes
 * the answer for a number). Reads only.
 */
export const semaphoreProbeScript: Script = /* @__PURE__ */ Object.freeze({
  name: "semaphore-probe",
  source: `local slots = {}
for i, key in ipairs(KEYS) do
if redis.call("EXISTS", key) == 1 then
slots[i] = "h"
else
slots[i] = "f"
end
end
return table.concat(slots)`,
  sha1: "a1520939077131639beac7aa99302051c9354869",
});
