/**
 * Strict reading of the fencing scripts' replies. A reply of any other shape is a node error,
 * never a vote: a truncated array, a number where a string belongs, an unknown status word, a
 * counter that is not a canonical integer below 2^53.
 * @module
 */
import { NodeError } from "../base/errors.js";
import { describeReply } from "../base/redact.js";
import type { RedisReply } from "../transport/rest.js";
import { MAX_FENCE } from "./lua.js";

/** Every status word a fencing script can answer. */
export type FenceStatus =
  | "OK"
  | "BUSY"
  | "ACK"
  | "NACK"
  | "LOST"
  | "NO_MARKER"
  | "QUARANTINED"
  | "NEEDS_REPAIR"
  | "REPAIRED"
  | "STALE"
  | "PRESENT"
  | "INITIALIZED";

/** A validated `{status, fence, incarnation}` reply. */
export interface FenceReply {
  readonly status: FenceStatus;
  /** The counter the script reported (0 when it read none). */
  readonly fence: number;
  /** The node's incarnation id, "" when it has no marker. */
  readonly incarnation: string;
}

/** The statuses each fencing script may answer. */
export const FENCE_STATUSES = Object.freeze({
  "fence-acquire": ["OK", "BUSY", "NO_MARKER", "QUARANTINED", "NEEDS_REPAIR"],
  "fence-rw-write": ["OK", "BUSY", "NO_MARKER", "QUARANTINED", "NEEDS_REPAIR"],
  "fence-ratchet": ["ACK", "NACK", "LOST", "NO_MARKER", "QUARANTINED", "NEEDS_REPAIR"],
  "fence-read": ["OK", "NO_MARKER", "QUARANTINED", "NEEDS_REPAIR"],
  "fence-repair": ["REPAIRED", "STALE", "NO_MARKER", "QUARANTINED"],
  "fence-quarantine": ["QUARANTINED", "PRESENT"],
  "fence-init": ["INITIALIZED", "PRESENT"],
} as const satisfies Record<string, readonly FenceStatus[]>);

/** The name of a fencing script on the nodes. */
export type FenceScriptName = keyof typeof FENCE_STATUSES;

const CANONICAL = /^(0|[1-9][0-9]{0,15})$/;
const INCARNATION = /^[0-9a-fA-F]{1,64}$/;

/** Parse a canonical decimal counter in [0, 2^53 - 1], or return undefined. */
export function parseFence(text: unknown): number | undefined {
  if (typeof text !== "string" || !CANONICAL.test(text)) return undefined;
  const value = Number(text);
  return value <= MAX_FENCE ? value : undefined;
}

/**
 * Validate one reply of `script` from node `nodeId`.
 * @throws {NodeError} when the reply does not have exactly the expected shape.
 */
export function parseFenceReply(nodeId: string, script: FenceScriptName, reply: RedisReply): FenceReply {
  if (Array.isArray(reply) && reply.length === 3) {
    const [status, fenceText, incarnation] = reply;
    const allowed: readonly string[] = FENCE_STATUSES[script];
    const fence = parseFence(fenceText);
    if (
      typeof status === "string" &&
      allowed.includes(status) &&
      fence !== undefined &&
      typeof incarnation === "string" &&
      // Only NO_MARKER (and a PRESENT marker we could not parse) come without an incarnation.
      (incarnation === "" ? status === "NO_MARKER" || status === "PRESENT" : INCARNATION.test(incarnation))
    ) {
      return { status: status as FenceStatus, fence, incarnation };
    }
  }
  throw new NodeError(nodeId, `unexpected reply to ${script} from ${nodeId}: ${describeReply(reply)}`);
}
