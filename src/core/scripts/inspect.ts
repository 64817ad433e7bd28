/**
 * Read a key's value and remaining TTL in one round trip.
 * @module
 */
import type { Script } from "./script.js";

/** KEYS[1]: the key. Returns `{value or nil, PTTL}` (PTTL is -2 for a missing key, -1 for no TTL). */
export const inspectScript: Script = Object.freeze({
  name: "inspect",
  source: `return {redis.call("GET", KEYS[1]), redis.call("PTTL", KEYS[1])}`,
  sha1: "639b669a2c71903afae4c72a8d8724478b797401",
});
