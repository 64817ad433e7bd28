/**
 * The cluster check on one node: keep the first fingerprint a client brought, and say which one
 * the node keeps (see `cluster.ts`).
 * @module
 */
import type { Script } from "./script.js";

/**
 * KEYS[1]: the fingerprint key. ARGV[1]: the client's fingerprint. ARGV[2]: `check` stores it
 * when the node keeps none (no TTL: only a reset replaces it), `reset` stores it in any case.
 * Returns the fingerprint the node keeps. Atomic, so two clients that check at once both read the
 * one that won. Sent by its source (see `script.runScriptBySource`): a client checks a node once.
 */
export const clusterScript: Script = Object.freeze({
  name: "cluster",
  source: `if ARGV[2] == "reset" then
redis.call("SET", KEYS[1], ARGV[1])
else
redis.call("SET", KEYS[1], ARGV[1], "NX")
end
return redis.call("GET", KEYS[1])`,
  sha1: "6e3f71b211bde8319f008e93466bbab51be7ff95",
});
