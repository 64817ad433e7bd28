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
import { runScript, runScriptRead, type Script } from "./scripts/script.js";
import { verifyScript } from "./scripts/verify.js";

/**
 * `SET key token NX PX ttl` for one key (a plain command, no Lua), the all-or-none script for several.
 * These functions return the node's promise with the reading chained to it rather than being async
 * functions awaiting it: an async layer costs a promise and a suspended frame per node per
 * operation (see `runScriptRead`).
 */
export function acquireOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  ttlMs: number,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  if (keys.length === 1)
    return setOnNode(node, keys[0] as string, token, ttlMs, context).then((reply) => readSet(reply, node));
  return yesOrHeld(node, acquireAllScript, keys, [token, ttlMs], "acquired", context);
}

/** `SET key token NX PX ttl`: the node's reply as it is, for {@link readSet} (see `FanOutOptions.read`). */
export function setOnNode(
  node: RedisNode,
  key: string,
  token: string,
  ttlMs: number,
  context: TaskContext,
): Promise<RedisReply> {
  context.countRequest();
  try {
    return node.command(["SET", key, token, "NX", "PX", ttlMs], context.signal);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** A reply to `SET NX` as an outcome: `acquired`, `held`, or a node error for any other reply. */
export function readSet(reply: RedisReply, node: RedisNode): NodeOutcomeKind {
  if (reply === "OK") return "acquired";
  if (reply === null) return "held";
  throw unexpected(node, "SET NX", reply);
}

/** Compare-and-PEXPIRE: `extended`, or `held` when the keys no longer hold our token. */
export function extendOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  ttlMs: number,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  // Whole ms: Redis refuses a PEXPIRE of 558.75, and a placeholder's length comes from measured
  // round trips (fractions of a ms on performance.now()); refused, a take's key would keep the
  // gate, and the line behind it, for its whole TTL.
  return yesOrHeld(node, extendScript, keys, [token, Math.ceil(ttlMs)], "extended", context);
}

/** Compare-and-DEL: `released` when any key was ours and is now gone, `not-held` when none was ours. */
export function releaseOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  return runScriptRead(node, releaseScript, keys, [token], context, readRelease);
}

function readRelease(reply: RedisReply, node: RedisNode, keys: readonly string[]): NodeOutcomeKind {
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
export function verifyOnNode(
  node: RedisNode,
  keys: readonly string[],
  token: string,
  context: TaskContext,
): Promise<number> {
  return runScriptRead(node, verifyScript, keys, [token], context, readVerify);
}

function readVerify(reply: RedisReply, node: RedisNode): number {
  if (typeof reply === "number" && Number.isInteger(reply) && reply >= -2) return reply;
  throw unexpected(node, verifyScript.name, reply);
}

/** Run a script that answers 1 or 0 on a node: `yes` for 1, `held` for 0, anything else a node error. */
export function yesOrHeld(
  node: RedisNode,
  script: Script,
  keys: readonly string[],
  args: readonly RedisArgument[],
  yes: NodeOutcomeKind,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  return runScriptRead(node, script, keys, args, context, (reply) => {
    if (reply === 1) return yes;
    if (reply === 0) return "held";
    throw unexpected(node, script.name, reply);
  });
}

/** A reply of the wrong shape: a node error that describes it, never quotes it. */
export function unexpected(node: RedisNode, command: string, reply: RedisReply): NodeError {
  return new NodeError(node.id, `unexpected reply to ${command} from ${node.id}: ${describeReply(reply)}`);
}
