/**
 * Check a lock on one node: its remaining TTL if every key still holds our token.
 * @module
 */
import type { Script } from "./script.js";

/** KEYS: the lock's keys. ARGV[1]: token. Returns the smallest PTTL of the keys, or -1 when any key no longer holds the token. */
export const verifyScript: Script = Object.freeze({
  name: "verify",
  source: `local least = -1
for _, key in ipairs(KEYS) do
if redis.call("GET", key) ~= ARGV[1] then
return -1
end
local pttl = redis.call("PTTL", key)
if least == -1 or pttl < least then
least = pttl
end
end
return least`,
  sha1: "3db8976c57cee298391a0b94f3c2158aabc67553",
});
