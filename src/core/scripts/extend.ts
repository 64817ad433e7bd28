/**
 * Extend a lock on one node: compare-and-PEXPIRE. It checks every key still holds our token
 * first, so it never revives an expired key nor touches someone else's.
 * @module
 */
import type { Script } from "./script.js";

/** KEYS: the lock's keys. ARGV[1]: token. ARGV[2]: new TTL in ms. Returns 1 when extended, 0 when any key no longer holds the token. */
export const extendScript: Script = Object.freeze({
  name: "extend",
  source: `for _, key in ipairs(KEYS) do
if redis.call("GET", key) ~= ARGV[1] then
return 0
end
end
for _, key in ipairs(KEYS) do
redis.call("PEXPIRE", key, ARGV[2])
end
return 1`,
  sha1: "caa699cba4eb4ce379e40a92035ff80e6ab70bc0",
});
