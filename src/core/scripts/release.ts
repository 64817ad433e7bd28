/**
 * Release a lock on one node: compare-and-DEL, key by key, so a key that expired and was taken
 * by someone else is left alone.
 * @module
 */
import type { Script } from "./script.js";

/** KEYS: the lock's keys. ARGV[1]: token. Returns how many keys were deleted. */
export const releaseScript: Script = Object.freeze({
  name: "release",
  source: `local deleted = 0
for _, key in ipairs(KEYS) do
if redis.call("GET", key) == ARGV[1] then
deleted = deleted + redis.call("DEL", key)
end
end
return deleted`,
  sha1: "afbf0e0869ac96e028e85b702fd7f2ad76750e0c",
});
