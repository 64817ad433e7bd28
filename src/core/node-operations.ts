/**
 * What acquire, extend, release and inspect send to one node, and how each reply is read.
 * Any reply of an unexpected shape is a {@link NodeError}, never a yes.
 * @module
 */
import { NodeError } from "../base/errors.js";
import { describeReply } from "../base/redact.js";
import type { NodeOutcomeKind } from "../base/report.js";
import type { RedisArgument, RedisNode, RedisReply } from "../transport/rest.js";
import type { TaskContext } from "./fanout.js";
import { acquireAllScript } from "./scripts/acquire-all.js";
import { extendScript } from "./scripts/extend.js";
import { inspectScript } from "./scripts/inspect.js";
import { releaseScript } from "./scripts/release.js";
import { runScript, type Script } from "./scripts/script.js";
import { verifyScript } from "./scripts/verify.js";

/** `SET key token NX PX ttl` for one key (a plain command, no Lua), the all-or-none script for several. */
export async function acquireOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  ttlMs: number,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  if (keys.length === 1) {
    context.countRequest();
    const reply = await node.command(["SET", keys[0] as string, token, "NX", "PX", ttlMs], context.signal);
    if (reply === "OK") return "acquired";
    if (reply === null) return "held";
    throw unexpected(node, "SET NX", reply);
  }
  return yesOrHeld(node, acquireAllScript, keys, [token, ttlMs], "acquired", context);
}

/** Compare-and-PEXPIRE: `extended`, or `held` when the keys no longer hold our token. */
export async function extendOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  ttlMs: number,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  return yesOrHeld(node, extendScript, keys, [token, ttlMs], "extended", context);
}

/** Compare-and-DEL: `released` when any key was ours and is now gone, `not-held` when none was ours. */
export async function releaseOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  const reply = await runScript(node, releaseScript, keys, [token], context);
  if (typeof reply === "number" && Number.isInteger(reply) && reply >= 0 && reply <= keys.length) {
    return reply > 0 ? "released" : "not-held";
  }
  throw unexpected(node, releaseScript.name, reply);
}

/** A key's value and remaining TTL on one node (`pttlMs` is -2 for a missing key, -1 for no TTL). */
export async function inspectOnNode(
  node: RedisNode,
  key: string,
  context: TaskContext,
): Promise<{ value: string | null; pttlMs: number }> {
  const reply = await runScript(node, inspectScript, [key], [], context);
  if (Array.isArray(reply) && reply.length === 2) {
    const [value, pttlMs] = reply;
    if ((value === null || typeof value === "string") && typeof pttlMs === "number") return { value, pttlMs };
  }
  throw unexpected(node, inspectScript.name, reply);
}

/** The smallest PTTL of the lock's keys on one node, or -1 when any key no longer holds our token. */
export async function verifyOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  context: TaskContext,
): Promise<number> {
  const reply = await runScript(node, verifyScript, keys, [token], context);
  if (typeof reply === "number" && Number.isInteger(reply) && reply >= -2) return reply;
  throw unexpected(node, verifyScript.name, reply);
}

/** Run a script that answers 1 or 0 on a node: `yes` for 1, `held` for 0, anything else a node error. */
export async function yesOrHeld(
  node: RedisNode,
  script: Script,
  keys: readonly string[],
  args: readonly RedisArgument[],
  yes: NodeOutcomeKind,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  const reply = await runScript(node, script, keys, args, context);
  if (reply === 1) return yes;
  if (reply === 0) return "held";
  throw unexpected(node, script.name, reply);
}

/** A reply of the wrong shape: a node error that describes it, never quotes it. */
export function unexpected(node: RedisNode, command: string, reply: RedisReply): NodeError {
  return new NodeError(node.id, `unexpected reply to ${command} from ${node.id}: ${describeReply(reply)}`);
}
