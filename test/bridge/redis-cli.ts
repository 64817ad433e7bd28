import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** What redis-cli printed for one command: a reply, or an error reply. */
export type CliReply = { result: unknown } | { error: string };

/**
 * Runs one command with `redis-cli -2 --json` against a local redis-server and parses the output.
 *
 * `-2` forces RESP2, the protocol the bridge speaks (redis-cli 7's --json defaults to RESP3,
 * where e.g. HGETALL prints an object and Lua booleans differ). Error replies are printed as
 * `error:"<text>"` (not JSON) and come back as `{ error }`.
 */
export async function redisCli(port: number, ...args: (string | number)[]): Promise<CliReply> {
  const { stdout } = await run("redis-cli", ["-p", String(port), "-2", "--json", ...args.map(String)]);
  const text = stdout.trim();
  if (text.startsWith("error:")) return { error: JSON.parse(text.slice("error:".length)) as string };
  return { result: JSON.parse(text) as unknown };
}

/** Like {@link redisCli} but returns the reply, throwing if redis-cli printed an error. */
export async function redisCliResult(port: number, ...args: (string | number)[]): Promise<unknown> {
  const reply = await redisCli(port, ...args);
  if ("error" in reply) throw new Error(`redis-cli ${args.join(" ")}: ${reply.error}`);
  return reply.result;
}

/** Like {@link redisCli} but returns the error text, throwing if the command succeeded. */
export async function redisCliError(port: number, ...args: (string | number)[]): Promise<string> {
  const reply = await redisCli(port, ...args);
  if (!("error" in reply))
    throw new Error(`redis-cli ${args.join(" ")}: expected an error, got ${JSON.stringify(reply.result)}`);
  return reply.error;
}
