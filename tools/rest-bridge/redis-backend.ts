import { Command, Redis, ReplyError } from "ioredis";
import type { RedisCommand } from "./commands.js";
import type { RedisReply } from "./encode.js";
import { HttpError } from "./errors.js";

/** The result of one command: a reply, or the error text Redis answered with. */
export type Outcome = { ok: true; reply: RedisReply } | { ok: false; error: string };

/** A transaction either ran (one outcome per command) or was discarded as a whole. */
export type TransactionOutcome = { aborted: false; outcomes: Outcome[] } | { aborted: true; error: string };

/** What the HTTP layer needs from Redis; implemented by {@link RedisBackend}. */
export interface CommandRunner {
  /** Runs one command. Rejects with an {@link HttpError} (503/504) when Redis cannot answer. */
  single(command: RedisCommand): Promise<Outcome>;
  /** Runs the commands in order (not atomically). Rejects like {@link CommandRunner.single}. */
  pipeline(commands: RedisCommand[]): Promise<Outcome[]>;
  /** Runs the commands as one MULTI/EXEC. Rejects like {@link CommandRunner.single}. */
  transaction(commands: RedisCommand[]): Promise<TransactionOutcome>;
}

/** Options of {@link RedisBackend}. */
export interface RedisBackendOptions {
  host: string;
  port: number;
  /** Per-command deadline; a command without a reply by then fails with HTTP 504. */
  commandTimeoutMs: number;
  /** Receives connection events (errors, reconnects); silent when omitted. */
  log?: ((message: string) => void) | undefined;
}

/**
 * An ioredis command whose reply is passed through untouched.
 *
 * `callBuffer` still applies ioredis's per-command reply transformers (HGETALL becomes an object,
 * some sorted-set replies get reshaped), which would make the bridge disagree with redis-cli.
 * Without `replyEncoding` every bulk/status string stays a Buffer, so values are binary-safe.
 */
class RawCommand extends Command {
  override transformReply(result: Buffer | Buffer[]): Buffer | Buffer[] {
    return result;
  }
}

/**
 * One ioredis connection to one redis-server, used for every request of a bridge.
 *
 * Commands are written to that single connection in the order the bridge receives them, so a
 * pipeline runs in order, and a MULTI…EXEC block written in one synchronous step cannot be
 * interleaved with other requests (the connection-pool bug of SRH #25 cannot happen).
 */
export class RedisBackend implements CommandRunner {
  private readonly client: Redis;
  private readonly options: RedisBackendOptions;
  /** The connection sending SCRIPT KILL, while one is under way. */
  private killer: Redis | undefined;

  constructor(options: RedisBackendOptions) {
    this.options = options;
    const log = options.log;
    this.client = new Redis({
      host: options.host,
      port: options.port,
      // RESP2, like Upstash and `redis-cli -2`: with RESP3 (the ioredis 6 default) Lua `true`
      // would become a boolean and maps would change shape.
      protocol: 2,
      // Fail fast while Redis is down instead of queueing: the caller gets a JSON 503 at once.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // Never re-send a command after a reconnect: it may already have been applied (a lock SET).
      autoResendUnfulfilledCommands: false,
      // Keep reconnecting forever, quickly, so a redis-server restarted on the same port is used again.
      retryStrategy: (times) => Math.min(50 * times, 250),
      connectTimeout: 2_000,
      commandTimeout: options.commandTimeoutMs,
      // CLIENT SETINFO only exists from Redis 7.2; not needed here.
      disableClientInfo: true,
    });
    // Without a listener ioredis prints "Unhandled error event" for every failed reconnect.
    this.client.on("error", (err: Error) => log?.(`redis ${options.host}:${options.port}: ${err.message}`));
    this.client.on("ready", () => log?.(`redis ${options.host}:${options.port}: ready`));
  }

  async single(command: RedisCommand): Promise<Outcome> {
    return settle(await Promise.allSettled([this.send(command)]))[0] as Outcome;
  }

  async pipeline(commands: RedisCommand[]): Promise<Outcome[]> {
    // All commands are written before any reply arrives; Redis answers in order.
    return settle(await Promise.allSettled(commands.map((command) => this.send(command))));
  }

  async transaction(commands: RedisCommand[]): Promise<TransactionOutcome> {
    // MULTI, the commands and EXEC are written in this one synchronous step (no await in
    // between), so no other request's command can land inside the transaction.
    const sent = [this.send(["multi"]), ...commands.map((command) => this.send(command)), this.send(["exec"])];
    const outcomes = settle(await Promise.allSettled(sent));
    const exec = outcomes.at(-1) as Outcome;
    const queued = outcomes.slice(1, -1);
    if (!exec.ok) {
      // EXECABORT: a command was refused at queue time (syntax/arity/unknown command).
      const index = queued.findIndex((outcome) => !outcome.ok);
      const cause = queued[index];
      const detail = cause && !cause.ok ? ` (command ${index + 1}: ${cause.error})` : "";
      return { aborted: true, error: `${exec.error}${detail}` };
    }
    if (!Array.isArray(exec.reply)) {
      // A nil EXEC reply only happens after WATCH, which the bridge refuses; be explicit anyway.
      return { aborted: true, error: "EXECABORT Transaction aborted" };
    }
    return {
      aborted: false,
      outcomes: exec.reply.map((reply) =>
        reply instanceof Error ? { ok: false, error: reply.message } : { ok: true, reply },
      ),
    };
  }

  /**
   * Resolves once the connection to Redis is ready (at once when it already is); rejects after
   * `timeoutMs`. Until then every request fails fast with 503, by design (no offline queue).
   */
  ready(timeoutMs: number): Promise<void> {
    if (this.client.status === "ready") return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onReady = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.client.off("ready", onReady);
        const { host, port } = this.options;
        reject(new Error(`redis ${host}:${port} was not ready within ${timeoutMs} ms`));
      }, timeoutMs);
      this.client.once("ready", onReady);
    });
  }

  /** Closes the connection at once; pending commands fail. */
  close(): void {
    this.client.disconnect(false);
    this.killer?.disconnect(false);
  }

  private send(command: RedisCommand): Promise<RedisReply> {
    const [name, ...args] = command;
    const raw = new RawCommand(name as string, args);
    const reply = this.client.sendCommand(raw) as Promise<RedisReply>;
    if (SCRIPT_COMMANDS.has((name as string).toLowerCase())) {
      reply.catch((err: unknown) => {
        if (err instanceof Error && err.message === "Command timed out") this.killBusyScript();
      });
    }
    return reply;
  }

  /**
   * A script still running past the command deadline blocks the whole redis-server (every other
   * client gets BUSY) until it ends: a client could freeze a node with `while true do end`.
   * Send SCRIPT KILL on a connection of its own (the bridge's is waiting for the script's reply).
   * Redis serves it once the script has run for its busy-reply-threshold (5 s by default). A
   * script that already wrote cannot be killed (UNKILLABLE): that node needs a restart.
   */
  private killBusyScript(): void {
    if (this.killer) return;
    const { host, port, log } = this.options;
    const killer = new Redis({
      host,
      port,
      protocol: 2,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      // One try: a server that is gone or stopped (SIGSTOP in fault tests) is not waited for.
      retryStrategy: () => null,
      // The ready check (INFO) would get BUSY: the server is, after all, running a script.
      enableReadyCheck: false,
      connectTimeout: 2_000,
      // Redis serves SCRIPT KILL only after the script's busy-reply-threshold (5 s by default).
      commandTimeout: 15_000,
      disableClientInfo: true,
    });
    this.killer = killer;
    killer.on("error", () => {});
    killer
      .connect()
      .then(() => killer.call("SCRIPT", "KILL"))
      .then(
        () => log?.(`redis ${host}:${port}: killed a script that ran past the command deadline`),
        (err: Error) => log?.(`redis ${host}:${port}: SCRIPT KILL failed: ${err.message}`),
      )
      .finally(() => {
        killer.disconnect(false);
        if (this.killer === killer) this.killer = undefined;
      });
  }
}

/** Commands that run a Lua script, which blocks the server while it runs. */
const SCRIPT_COMMANDS = new Set(["eval", "evalsha", "eval_ro", "evalsha_ro"]);

/**
 * Turns settled sends into outcomes. A Redis error reply is an ordinary outcome; anything else
 * (connection closed, writes refused while reconnecting, timeout) means Redis did not answer, so
 * the whole request fails with a 503/504 rather than pretending to have per-command results.
 */
function settle(results: PromiseSettledResult<RedisReply>[]): Outcome[] {
  const outcomes: Outcome[] = [];
  for (const result of results) {
    if (result.status === "fulfilled") {
      outcomes.push({ ok: true, reply: result.value });
    } else if (result.reason instanceof ReplyError) {
      outcomes.push({ ok: false, error: (result.reason as Error).message });
    } else {
      throw transportError(result.reason);
    }
  }
  return outcomes;
}

function transportError(reason: unknown): HttpError {
  const message = reason instanceof Error ? reason.message : String(reason);
  if (message === "Command timed out") {
    return new HttpError(504, "ERR redis did not answer in time (command timed out)");
  }
  return new HttpError(503, `ERR redis unavailable: ${message}`);
}
