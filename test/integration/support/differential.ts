/**
 * The two sides of a differential test (a real redis-server node and the memory node of
 * `edge-redlock/testing`, each under a key prefix of its own): the same commands and scripts sent to
 * either, their answers normalised so that both compare.
 */

import { runScript, type Script } from "../../../src/core/scripts/script.js";
import type { RedisArgument, RedisNode, RedisReply } from "../../../src/index.js";

/** What a step answered: the reply, or the Redis error text without the script's location. */
export type Answer = { reply: RedisReply } | { error: string };

/** One node, real or in memory, under a key prefix of its own. */
export class DifferentialSide {
  constructor(
    readonly node: RedisNode,
    readonly prefix: string,
  ) {}

  /** A name of the test's under this side's prefix. */
  protected key(name: string): string {
    return this.prefix + name;
  }

  /** What `run` answers, or its Redis error text. */
  protected async answer(run: () => Promise<RedisReply>): Promise<Answer> {
    try {
      return { reply: await run() };
    } catch (error) {
      const text = (error as { redisError?: string }).redisError ?? `not a Redis error: ${String(error)}`;
      // Redis appends " script: <sha>, on @user_script:<line>." to an error raised in a script.
      return { error: text.replace(/ script: .*$/s, "") };
    }
  }

  /** One command, as given (its keys already prefixed). */
  protected send(...args: RedisArgument[]): Promise<Answer> {
    return this.answer(() => this.node.command(args, AbortSignal.timeout(5000)));
  }

  /** One script, on `keys` under this side's prefix. */
  protected script(script: Script, keys: readonly string[], args: readonly RedisArgument[]): Promise<Answer> {
    const context = { signal: AbortSignal.timeout(5000), countRequest() {} };
    return this.answer(() =>
      runScript(
        this.node,
        script,
        keys.map((k) => this.key(k)),
        args,
        context,
      ),
    );
  }
}
