/**
 * Validating what a call gives besides options: its TTL and its resource names. Nothing is sent
 * before they pass.
 * @module
 */
import { InvalidArgumentError } from "../base/errors.js";
import { RESERVED_KEY_PART } from "./keys.js";
import { MAX_RESOURCE_LENGTH, MAX_RESOURCES, MAX_TTL_MS, type ResolvedOptions } from "./options.js";

/**
 * Validate a TTL against the resolved options: a positive integer, at most {@link MAX_TTL_MS},
 * and long enough to leave `minValidityMs` after the drift allowance.
 */
export function validateTtl(ttlMs: unknown, options?: Pick<ResolvedOptions, "driftFactor" | "minValidityMs">): number {
  if (typeof ttlMs !== "number" || !Number.isInteger(ttlMs) || ttlMs <= 0) {
    throw new InvalidArgumentError(`ttlMs must be a positive integer number of milliseconds, got ${describe(ttlMs)}`);
  }
  if (ttlMs > MAX_TTL_MS) {
    throw new InvalidArgumentError(
      `ttlMs must be at most ${MAX_TTL_MS} (24 h), got ${ttlMs}; extend the lock to hold it longer`,
    );
  }
  if (options) {
    const usable = ttlMs - (Math.floor(ttlMs * options.driftFactor) + 2);
    if (usable <= options.minValidityMs) {
      throw new InvalidArgumentError(
        `ttlMs ${ttlMs} leaves no validity after the drift allowance and minValidityMs ${options.minValidityMs}`,
      );
    }
  }
  return ttlMs;
}

/**
 * Normalise one resource or a list of them: non-empty strings, at most {@link MAX_RESOURCE_LENGTH}
 * long, no duplicates, at most {@link MAX_RESOURCES}. Returns them sorted, so that two
 * multi-resource locks always take their keys in the same order.
 */
export function validateResources(resources: unknown): string[] {
  // One valid resource, the common call: no copy, sort or search (anything else takes the checks below).
  if (
    typeof resources === "string" &&
    resources.length > 0 &&
    resources.length <= MAX_RESOURCE_LENGTH &&
    !resources.startsWith(RESERVED_KEY_PART)
  )
    return [resources];
  const list = typeof resources === "string" ? [resources] : resources;
  if (!Array.isArray(list) || list.length === 0) {
    throw new InvalidArgumentError(
      `resources must be a non-empty string or a non-empty array of strings, got ${describe(resources)}`,
    );
  }
  if (list.length > MAX_RESOURCES) {
    throw new InvalidArgumentError(`a lock covers at most ${MAX_RESOURCES} resources, got ${list.length}`);
  }
  for (const resource of list) {
    if (typeof resource !== "string" || resource.length === 0) {
      throw new InvalidArgumentError(`every resource must be a non-empty string, got ${describe(resource)}`);
    }
    if (resource.length > MAX_RESOURCE_LENGTH) {
      throw new InvalidArgumentError(
        `resource names are at most ${MAX_RESOURCE_LENGTH} characters, got ${resource.length}`,
      );
    }
  }
  const reserved = (list as string[]).find((r) => r.startsWith(RESERVED_KEY_PART));
  if (reserved !== undefined) {
    throw new InvalidArgumentError(
      `resource names starting with ${JSON.stringify(RESERVED_KEY_PART)} are reserved for the library's own keys`,
    );
  }
  const sorted = [...(list as string[])].sort();
  const duplicate = sorted.find((r, i) => i > 0 && r === sorted[i - 1]);
  if (duplicate !== undefined) throw new InvalidArgumentError(`resource listed twice: ${JSON.stringify(duplicate)}`);
  return sorted;
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (Array.isArray(value)) return `an array of ${value.length}`;
  return String(value);
}
