/**
 * Acquire several keys on one node, all or none, so that two multi-resource locks can never each
 * hold part of the other's keys on a node.
 * @module
 */
import type { Script } from "./script.js";

/** KEYS: the lock's keys (sorted). ARGV[1]: token. ARGV[2]: TTL in ms. Returns 1 when every key was set, 0 (and writes nothing) when any key exists. */
export const acquireAllScript: Script = Object.freeze({
  name: "acquire-all",
  source: `for _, key in ipairs(KEYS) do
if redis.call("EXISTS", key) == 1 then
return 0
end
end
for _, key in ipairs(KEYS) do
redis.call("SET", key, ARGV[1], "PX", ARGV[2])
end
return 1`,
  sha1: "19fb93ac21e73ce368b584c39bc4ea26137b10b3",
});
