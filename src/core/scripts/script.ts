/**
 * Running a Lua script on a node: `EVALSHA` first, then `EVAL` only when the node answers
 * `NOSCRIPT` (its script cache is empty after a restart or `SCRIPT FLUSH`). A node that answered
 * `NOSCRIPT` has most likely lost every script: until a script has run there again, it goes as
 * `EVAL` at once, so that a flushed node costs each client one request more, not one per script
 * (a fenced take on a restarted cluster asked 2N more, enough to exhaust a waiter's budget).
 * @module
 */
import { NodeError } from "../../base/errors.js";
import type { RedisArgument, RedisNode, RedisReply } from "../../transport/rest.js";
import type { TaskContext } from "../fanout.js";

/** A Lua script with its SHA-1, committed as a literal (a unit test recomputes it). */
export interface Script {
  /** A short name, for messages (never the arguments). */
  readonly name: string;
  /** The Lua source, as sent by `EVAL`. */
  readonly source: string;
  /** The SHA-1 of `source`, as sent by `EVALSHA`. */
  readonly sha1: string;
}

/** Run `script` on `node`, counting each request on `context`. */
export function runScript(
  node: RedisNode,
  script: Script,
  keys: readonly string[],
  args: readonly RedisArgument[],
  context: TaskContext,
): Promise<RedisReply> {
  return runScriptRead(node, script, keys, args, context, replyAsIs);
}

/**
 * Run `script` on `node` by `EVAL` with its source, never `EVALSHA` first: for a short script a
 * client runs about once per node (the cluster check), where `EVALSHA` costs a node whose script
 * cache is cold (a new database, a restart) two requests instead of one, on a fresh isolate's
 * first call, the one with the most to send.
 */
export function runScriptBySource(
  node: RedisNode,
  script: Script,
  keys: readonly string[],
  args: readonly RedisArgument[],
  context: TaskContext,
): Promise<RedisReply> {
  context.countRequest();
  return send(node, scriptCommand("EVAL", script.source, keys, args), context.signal);
}

/**
 * Run `script` on `node` and read its reply with `read`, which may throw for a reply of the wrong
 * shape. The reading happens in the reaction to the node's answer: not an async function awaiting
 * {@link runScript}, because each async layer costs a promise and a suspended frame per request,
 * and every node of every operation goes through here.
 */
export function runScriptRead<T>(
  node: RedisNode,
  script: Script,
  keys: readonly string[],
  args: readonly RedisArgument[],
  context: TaskContext,
  read: (reply: RedisReply, node: RedisNode, keys: readonly string[]) => T,
): Promise<T> {
  context.countRequest();
  const since = flushed.get(node);
  if (since !== undefined && !since.has(script.sha1)) {
    return byEval(node, script, keys, args, context.signal, since).then((reply) => read(reply, node, keys));
  }
  return send(node, scriptCommand("EVALSHA", script.sha1, keys, args), context.signal).then(
    (reply) => read(reply, node, keys),
    (error: unknown) => {
      if (!(error instanceof NodeError) || !error.redisError?.toUpperCase().includes("NOSCRIPT")) throw error;
      context.countRequest();
      const none = new Set<string>();
      flushed.set(node, none);
      return byEval(node, script, keys, args, context.signal, none).then((reply) => read(reply, node, keys));
    },
  );
}

/**
 * The nodes that answered `NOSCRIPT`, each with the scripts run there by `EVAL` since (cached on
 * the node again). Keyed by the node object: each client's own for a `{ url, token }`, shared by
 * the clients given one `RedisNode` object (the same server, so the same script cache).
 */
const flushed = new WeakMap<RedisNode, Set<string>>();

/** `script` by `EVAL`, noted in `since` once the node has run it. */
function byEval(
  node: RedisNode,
  script: Script,
  keys: readonly string[],
  args: readonly RedisArgument[],
  signal: AbortSignal,
  since: Set<string>,
): Promise<RedisReply> {
  return send(node, scriptCommand("EVAL", script.source, keys, args), signal).then((reply) => {
    since.add(script.sha1);
    return reply;
  });
}

/** One request: a node that throws instead of rejecting still fails as a request, not as its caller. */
function send(node: RedisNode, line: RedisArgument[], signal: AbortSignal): Promise<RedisReply> {
  try {
    return node.command(line, signal);
  } catch (error) {
    return Promise.reject(error);
  }
}

function replyAsIs(reply: RedisReply): RedisReply {
  return reply;
}

/**
 * `[command, script, numkeys, ...keys, ...args]`, filled into one array of its final length: the
 * spread form builds it through iterators, on every request of every operation.
 */
function scriptCommand(
  command: "EVAL" | "EVALSHA",
  script: string,
  keys: readonly string[],
  args: readonly RedisArgument[],
): RedisArgument[] {
  const keyCount = keys.length;
  const argCount = args.length;
  const line: RedisArgument[] = new Array(3 + keyCount + argCount);
  line[0] = command;
  line[1] = script;
  line[2] = keyCount;
  for (let i = 0; i < keyCount; i++) line[3 + i] = keys[i] as string;
  for (let i = 0; i < argCount; i++) line[3 + keyCount + i] = args[i] as RedisArgument;
  return line;
}
