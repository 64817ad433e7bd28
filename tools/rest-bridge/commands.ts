import { badRequest } from "./errors.js";

/**
 * One Redis command as sent to redis-server: the name (as the client spelled it, so Redis error
 * texts match redis-cli's) followed by its arguments.
 */
export type RedisCommand = string[];

/** Parses the raw request body as JSON, turning a syntax error into a 400. */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === "") throw badRequest("ERR empty request body: expected a JSON array");
  try {
    return JSON.parse(text);
  } catch (err) {
    throw badRequest(`ERR invalid JSON body: ${(err as Error).message}`);
  }
}

/**
 * Validates one command array (`["SET","k","v","PX",1000]`) and converts it to strings.
 *
 * Argument rules follow the reference checklist (§10.4): strings pass as they are, numbers become
 * their decimal text, booleans become "true"/"false" (what SRH/Redix do); objects, nested arrays
 * and null are rejected because there is no unambiguous Redis argument for them.
 *
 * @param where - prefix for error messages, e.g. "pipeline command 2: ".
 */
export function toRedisCommand(value: unknown, where = ""): RedisCommand {
  if (!Array.isArray(value)) {
    throw badRequest(`ERR ${where}expected a JSON array of command name and arguments`);
  }
  if (value.length === 0) throw badRequest(`ERR ${where}empty command`);
  const [name, ...args] = value as unknown[];
  if (typeof name !== "string" || name.length === 0) {
    throw badRequest(`ERR ${where}the command name must be a non-empty string`);
  }
  return [name, ...args.map((arg, i) => toArgument(arg, `${where}argument ${i + 1}`))];
}

function toArgument(arg: unknown, where: string): string {
  switch (typeof arg) {
    case "string":
      return arg;
    case "number":
      // JSON numbers are always finite. String() gives the shortest round-trip decimal.
      return String(arg);
    case "boolean":
      return arg ? "true" : "false";
    default:
      throw badRequest(
        `ERR ${where}: only strings, numbers and booleans are allowed, got ${arg === null ? "null" : Array.isArray(arg) ? "an array" : typeof arg}`,
      );
  }
}

/**
 * Validates a `/pipeline` or `/multi-exec` body: a non-empty array of command arrays.
 *
 * @param kind - "pipeline" or "transaction", used in error messages.
 */
export function toRedisCommands(value: unknown, kind: "pipeline" | "transaction"): RedisCommand[] {
  if (!Array.isArray(value)) {
    throw badRequest(`ERR the ${kind} body must be a JSON array of command arrays`);
  }
  if (value.length === 0) throw badRequest(`ERR empty ${kind}: send at least one command`);
  return value.map((element, i) => {
    if (!Array.isArray(element)) {
      throw badRequest(`ERR ${kind} element ${i + 1} must be an array of command name and arguments`);
    }
    return toRedisCommand(element, `${kind} command ${i + 1}: `);
  });
}

// Commands that would change the state of the shared connection (transactions, pub/sub, database
// selection, protocol switch, replication stream, client reply mode) or block it for every other
// request. Upstash refuses the same families over REST; letting them through would break or stall
// the bridge's single Redis connection.
const UNAVAILABLE = new Set([
  "multi",
  "exec",
  "discard",
  "watch",
  "unwatch",
  "subscribe",
  "psubscribe",
  "ssubscribe",
  "unsubscribe",
  "punsubscribe",
  "sunsubscribe",
  "monitor",
  "select",
  "swapdb",
  "quit",
  "reset",
  "hello",
  "auth",
  "sync",
  "psync",
  "replconf",
  "blpop",
  "brpop",
  "brpoplpush",
  "blmove",
  "blmpop",
  "bzpopmin",
  "bzpopmax",
  "bzmpop",
  "wait",
  "waitaof",
]);

// Server administration, replication, script and function control, client control and cluster
// commands: Upstash's REST API serves none of them (its compatibility table lists, of the server
// group, only ACL, DBSIZE, FLUSHALL, FLUSHDB and TIME, and of scripting only EVAL, EVALSHA and
// SCRIPT EXISTS / LOAD / FLUSH). Through a bridge any client holding the token could otherwise
// SHUTDOWN its redis-server, reconfigure it, make it a replica of another host, pause every client
// or freeze the server (DEBUG SLEEP). ACL is refused too: Upstash serves it on its own users, but
// here `ACL SETUSER default off` would lock the bridge out of its server. Refused unless the
// bridge was started with `allowAdminCommands`, for a test that needs one of them.
const ADMIN = new Set([
  "shutdown",
  "config",
  "debug",
  "save",
  "bgsave",
  "bgrewriteaof",
  "replicaof",
  "slaveof",
  "failover",
  "migrate",
  "module",
  "acl",
  "client",
  "cluster",
  "readonly",
  "readwrite",
  "asking",
  "function",
  "fcall",
  "fcall_ro",
  "slowlog",
  "latency",
  "pfdebug",
  "pfselftest",
]);

/** SCRIPT subcommands Upstash serves; the others (KILL, DEBUG) are admin commands. */
const SCRIPT_SUBCOMMANDS = new Set(["exists", "load", "flush"]);

/**
 * Returns an error message when the command cannot be served through the REST bridge, or
 * `undefined` when it may be sent to Redis. The text mirrors Upstash's historical wording.
 *
 * @param allowAdminCommands - let administration commands through (see `ADMIN`). Commands that
 *   would hijack or block the bridge's one shared connection stay refused regardless.
 */
export function unavailableReason(command: RedisCommand, allowAdminCommands = false): string | undefined {
  const [spelled, ...args] = command;
  const name = spelled?.toLowerCase() ?? "";
  const lowerArgs = args.map((a) => a.toLowerCase());
  // For XREAD/XREADGROUP only the options before STREAMS count: after it come key names and ids.
  const streamsAt = lowerArgs.indexOf("streams");
  const options = streamsAt === -1 ? lowerArgs : lowerArgs.slice(0, streamsAt);
  const blocked =
    UNAVAILABLE.has(name) ||
    (name === "client" && lowerArgs[0] === "reply") ||
    ((name === "xread" || name === "xreadgroup") && options.includes("block"));
  if (blocked) return `ERR Command is not available: '${name}'`;
  if (allowAdminCommands) return undefined;
  if (ADMIN.has(name)) return adminRefusal(name);
  if (name === "script" && !SCRIPT_SUBCOMMANDS.has(lowerArgs[0] ?? "")) {
    return adminRefusal(`script${lowerArgs[0] ? ` ${lowerArgs[0]}` : ""}`);
  }
  return undefined;
}

function adminRefusal(name: string): string {
  return `ERR Command is not available: '${name}' (an admin command: the bridge runs it only when started with --allow-admin-commands)`;
}
