import type { NodeOutcomeKind } from "../base/report.js";
import type { TaskContext } from "../core/fanout.js";
import { unexpected, yesOrHeld } from "../core/node-operations.js";
import { runScript } from "../core/scripts/script.js";
import type { RedisNode } from "../transport/rest.js";
import { rwExtendScript } from "./scripts/rw-extend.js";
import { rwReadScript } from "./scripts/rw-read.js";
import { rwReleaseScript } from "./scripts/rw-release.js";
import { rwVerifyScript } from "./scripts/rw-verify.js";
import { rwWriteScript } from "./scripts/rw-write.js";
import { semaphoreProbeScript } from "./scripts/semaphore-probe.js";

/** Per slot, whether its key exists on the node (the slot is held there). */
export async function probeOnNode(node: RedisNode, keys: readonly string[], context: TaskContext): Promise<boolean[]> {
  const reply = await runScript(node, semaphoreProbeScript, keys, [], context);
  if (typeof reply === "string" && reply.length === keys.length && /^[hf]*$/.test(reply)) {
    return [...reply].map((letter) => letter === "h");
  }
  throw unexpected(node, semaphoreProbeScript.name, reply);
}

/** Add a reader: `acquired`, or `held` while a writer holds the lock or waits for it. */
export async function readOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  ttlMs: number,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  return yesOrHeld(node, rwReadScript, keys, [token, ttlMs], "acquired", context);
}

/** A waiting writer: its id, and how long its mark stops new readers (0: no mark). */
export interface WriterMark {
  readonly id: string;
  readonly ttlMs: number;
}

/** Set the write key: `acquired`, or `held` while a writer or a live reader holds the lock. */
export async function writeOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  ttlMs: number,
  mark: WriterMark,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  return yesOrHeld(node, rwWriteScript, keys, [token, ttlMs, mark.id, mark.ttlMs], "acquired", context);
}

/**
 * Compare-and-DEL of a reader or writer: `released`, or `not-held` when the token holds nothing
 * there. With `writer`, also clears that writer's waiting mark if it is still the node's (a write
 * lock's release; a writer that gave up sends an empty token, which matches nothing).
 */
export async function rwReleaseOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  context: TaskContext,
  writer = "",
): Promise<NodeOutcomeKind> {
  const reply = await runScript(node, rwReleaseScript, keys, [token, writer], context);
  if (reply === 0 || reply === 1) return reply === 1 ? "released" : "not-held";
  throw unexpected(node, rwReleaseScript.name, reply);
}

/** Compare-and-PEXPIRE of a reader or writer: `extended`, or `held` when the token holds nothing live. */
export async function rwExtendOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  ttlMs: number,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  return yesOrHeld(node, rwExtendScript, keys, [token, ttlMs], "extended", context);
}

/** What is left of a reader or writer on one node, in ms, or -1 when the token holds nothing live. */
export async function rwVerifyOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  context: TaskContext,
): Promise<number> {
  const reply = await runScript(node, rwVerifyScript, keys, [token], context);
  if (typeof reply === "number" && Number.isInteger(reply) && reply >= -2) return reply;
  throw unexpected(node, rwVerifyScript.name, reply);
}
