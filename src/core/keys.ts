/**
 * Lock keys, and the reserved namespace of the keys the library writes for itself.
 *
 * A lock key is `keyPrefix + resource`. Every other key the library writes (a gate's line, the
 * cluster's fingerprint, fencing) starts with {@link RESERVED_KEY_PART}, either right at the start
 * of the key or right after the `keyPrefix`. No lock key may start with it in either place, so no
 * resource name reaches a key of the library's own.
 * @module
 */
import { InvalidArgumentError } from "../base/errors.js";

/** The reserved part of every key the library writes for itself. */
export const RESERVED_KEY_PART = "__edge-redlock__:";

/**
 * The lock keys of (validated, sorted) `resources`. Throws an {@link InvalidArgumentError} for a
 * resource whose name, or whose key, starts with {@link RESERVED_KEY_PART}.
 */
export function lockKeys(resources: readonly string[], keyPrefix: string): string[] {
  return resources.map((resource) => {
    const key = keyPrefix + resource;
    if (resource.startsWith(RESERVED_KEY_PART) || key.startsWith(RESERVED_KEY_PART)) {
      throw new InvalidArgumentError(
        `resource names whose name or key starts with ${JSON.stringify(RESERVED_KEY_PART)} are reserved for the library's own keys`,
      );
    }
    return key;
  });
}

/**
 * A 32-bit FNV-1a hash of a list of keys, the same in every client: what picks a line's gate node.
 * Each key's length goes in before its characters, so no other list of keys hashes the same
 * sequence of units (`["a", "b"]` and `["a\nb"]` differ in their lengths).
 */
export function keysHash(keys: readonly string[]): number {
  // FNV-1a, one 16-bit unit at a time, written out rather than through a closure per call.
  let hash = 0x811c9dc5;
  for (const key of keys) {
    hash = Math.imul(hash ^ (key.length & 0xffff), 0x01000193);
    hash = Math.imul(hash ^ (key.length >>> 16), 0x01000193);
    for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  }
  return hash >>> 0;
}
