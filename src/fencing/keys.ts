/**
 * Where fencing keeps its state on each node, relative to the lock keys.
 *
 * A fenced lock's keys are exactly those of a plain lock, `keyPrefix + resource`, so extend,
 * release, verify and inspect work on it unchanged. Fencing adds four keys per node and per
 * `keyPrefix` (a namespace), all under the reserved name `keyPrefix + "__edge-redlock__:"`:
 *
 * | key | type | TTL | content |
 * |---|---|---|---|
 * | `…:incarnation` | string | none | `ok:<id>` (initialised) or `recovering:<id>` (lost its data once) |
 * | `…:quarantine` | string | PX ≥ the longest TTL | `<id>` while the node sits out its quarantine |
 * | `…:fence` | hash | none | field = resource, value = the fence counter (decimal integer) |
 * | `…:repaired` | hash | none | field = resource, value = the incarnation id it was repaired in |
 *
 * Why hashes and a fixed reserved prefix: a lock key is `keyPrefix + resource` for any resource
 * string, so every other key name in the namespace could collide with some lock. With the counters
 * in one hash per namespace, only four exact names are taken, all starting with
 * `__edge-redlock__:`; {@link isReservedResource} tells the caller to refuse such resource names.
 * Even if a plain lock were taken on one of them, nothing unsafe follows: a string where a hash is
 * expected makes the scripts fail with `WRONGTYPE` (a node error, never a vote), and a hash where a
 * lock key is expected makes `SET NX` answer "held".
 *
 * The namespace is per `keyPrefix`: two applications sharing nodes under different prefixes keep
 * separate markers and counters, and a node restart is detected by each of them.
 * @module
 */

import { RESERVED_KEY_PART } from "../core/keys.js";

export { RESERVED_KEY_PART };

/** The per-node fencing keys of one namespace. */
export interface FencingKeys {
  /** Incarnation marker: `ok:<id>` or `recovering:<id>`, no TTL. */
  readonly incarnation: string;
  /** Quarantine: present (with a PX TTL) while the node must not grant nor acknowledge. */
  readonly quarantine: string;
  /** Hash of fence counters, one field per resource. */
  readonly counters: string;
  /** Hash of repair stamps, one field per resource: the incarnation id it was repaired in. */
  readonly repairs: string;
}

/** The fencing keys of the namespace `keyPrefix`. */
export function fencingKeys(keyPrefix: string): FencingKeys {
  const base = keyPrefix + RESERVED_KEY_PART;
  return Object.freeze({
    incarnation: `${base}incarnation`,
    quarantine: `${base}quarantine`,
    counters: `${base}fence`,
    repairs: `${base}repaired`,
  });
}

/**
 * Whether a resource name falls in the reserved namespace (it starts with
 * {@link RESERVED_KEY_PART}); such a lock key could coincide with a fencing key.
 */
export function isReservedResource(resource: string): boolean {
  return resource.startsWith(RESERVED_KEY_PART);
}

/** The keys a fenced script is given: the four fencing keys, then the lock keys. */
export function scriptKeys(keys: FencingKeys, lockKeys: readonly string[] = []): string[] {
  return [keys.incarnation, keys.quarantine, keys.counters, keys.repairs, ...lockKeys];
}
