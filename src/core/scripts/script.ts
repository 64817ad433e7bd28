/**
 * Running a Lua script on a node: `EVALSHA` first, then `EVAL` only when the node answers
 * `NOSCRIPT` (its script cache is empty after a restart or `SCRIPT FLUSH`).
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
export async function runScript(
  node: RedisNode,
  script: Script,
  keys: readonly string[],
  args: readonly RedisArgument[],
  context: TaskContext,
): Promise<RedisReply> {
  context.countRequest();
  try {
    return await node.command(scriptCommand("EVALSHA", script.sha1, keys, args), context.signal);
  } catch (error) {
    if (!(error instanceof NodeError) || !error.redisError?.toUpperCase().includes("NOSCRIPT")) throw error;
    context.countRequest();
    return await node.command(scriptCommand("EVAL", script.source, keys, args), context.signal);
  }
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
