import { type Context, Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { createTokenCheck, UNAUTHORIZED_MESSAGE } from "./auth.js";
import { parseJsonBody, type RedisCommand, toRedisCommand, toRedisCommands, unavailableReason } from "./commands.js";
import { encodeReply, type JsonValue } from "./encode.js";
import { badRequest, HttpError } from "./errors.js";
import type { CommandRunner, Outcome } from "./redis-backend.js";

/** Where an artificial delay is applied: before the command runs, or after it ran. */
export type DelayPhase = "request" | "response";

/** The fault-injection delay of a bridge, read on every request. */
export interface DelaySpec {
  /** Fixed delay added to every round trip, in milliseconds (0: none). */
  ms: number;
  /** Whether the fixed delay holds the request back before the command runs, or its response after. */
  phase: DelayPhase;
  /**
   * Each request also waits a fresh random delay, uniform in `[0, jitterMs)`, before its command
   * runs (request direction), so concurrent clients reach the node in varying orders.
   * @default 0
   */
  jitterMs?: number;
}

/** Options of {@link createBridgeApp}. */
export interface BridgeAppOptions {
  /** The only accepted bearer token. */
  token: string;
  /** Executes the commands (a {@link RedisBackend} in production). */
  runner: CommandRunner;
  /** Largest accepted request body, in bytes. */
  maxBodyBytes: number;
  /** Read on every request: the fault-injection delay currently configured. */
  delay: () => DelaySpec;
  /**
   * Let administration commands (SHUTDOWN, CONFIG, DEBUG, …) through; see `unavailableReason`.
   * @default false
   */
  allowAdminCommands?: boolean;
  /** Called once for every HTTP request received, before any delay (server-side request counting). */
  onRequest?: () => void;
  /** Called with the commands of every well-formed request, before they run (server-side command counting). */
  onCommands?: (commands: readonly RedisCommand[]) => void;
}

type PerCommand = { result: JsonValue } | { error: string };

const ROUTES = ["/", "/pipeline", "/multi-exec"] as const;

/**
 * Builds the Hono app that speaks the Upstash Redis REST protocol (reference §1-4).
 *
 * Routes: `POST /` (one command), `POST /pipeline`, `POST /multi-exec`; PUT is accepted like POST,
 * as on Upstash. Every response, including every error, has a JSON body.
 */
export function createBridgeApp(options: BridgeAppOptions): Hono {
  const app = new Hono();
  const isAuthorized = createTokenCheck(options.token);
  const refusal = (command: RedisCommand) => unavailableReason(command, options.allowAdminCommands ?? false);

  const delay: MiddlewareHandler = async (_c, next) => {
    options.onRequest?.();
    const { ms, phase, jitterMs = 0 } = options.delay();
    // Jitter goes on the request direction: it is what makes clients arrive in different orders.
    if (jitterMs > 0) await sleep(Math.random() * jitterMs);
    if (ms > 0 && phase === "request") await sleep(ms);
    await next();
    if (ms > 0 && phase === "response") await sleep(ms);
  };

  // Checked before the body is read, so nothing from an unauthenticated request reaches Redis.
  const auth: MiddlewareHandler = async (c, next) => {
    if (!isAuthorized(c.req.header("authorization"))) {
      return c.json({ error: UNAUTHORIZED_MESSAGE }, 401);
    }
    await next();
  };

  const limit = bodyLimit({
    maxSize: options.maxBodyBytes,
    // Upstash's wording for the same condition; 400 like every other bad-input error here.
    onError: (c) => {
      // The rest of the body is never read, so this connection cannot carry another request:
      // tell the client, or it would reuse the socket and see it closed under the next request.
      c.header("Connection", "close");
      return c.json(
        {
          error: `ERR max request size exceeded (limit ${options.maxBodyBytes} bytes)`,
        },
        400,
      );
    },
  });

  app.use("*", delay);

  app.on(["POST", "PUT"], "/", auth, limit, async (c) => {
    const command = toRedisCommand(await readJson(c));
    options.onCommands?.([command]);
    const refused = refusal(command);
    if (refused) throw badRequest(refused);
    const outcome = await options.runner.single(command);
    if (!outcome.ok) return c.json({ error: outcome.error }, 400);
    return c.json({ result: encodeReply(outcome.reply, wantsBase64(c)) });
  });

  app.on(["POST", "PUT"], "/pipeline", auth, limit, async (c) => {
    const commands = toRedisCommands(await readJson(c), "pipeline");
    options.onCommands?.(commands);
    // An unavailable command fails on its own, like any other failing pipeline element; the
    // others still run (auto-pipelining in @upstash/redis batches unrelated commands together).
    const refusals = commands.map((command) => refusal(command));
    const runnable = commands.filter((_, i) => refusals[i] === undefined);
    const ran = runnable.length > 0 ? await options.runner.pipeline(runnable) : [];
    let next = 0;
    const outcomes = refusals.map(
      (refusal): Outcome => (refusal === undefined ? (ran[next++] as Outcome) : { ok: false, error: refusal }),
    );
    return c.json(outcomes.map((outcome) => perCommand(outcome, wantsBase64(c))));
  });

  app.on(["POST", "PUT"], "/multi-exec", auth, limit, async (c) => {
    const commands = toRedisCommands(await readJson(c), "transaction");
    options.onCommands?.(commands);
    commands.forEach((command, i) => {
      const refused = refusal(command);
      if (refused)
        throw badRequest(`EXECABORT Transaction discarded because of previous errors. (command ${i + 1}: ${refused})`);
    });
    const tx = await options.runner.transaction(commands);
    if (tx.aborted) return c.json({ error: tx.error }, 400);
    return c.json(tx.outcomes.map((outcome) => perCommand(outcome, wantsBase64(c))));
  });

  for (const path of ROUTES) {
    app.all(path, (c) => {
      c.header("Allow", "POST, PUT");
      return c.json(
        {
          error: `ERR method ${c.req.method} not allowed on ${path}: use POST`,
        },
        405,
      );
    });
  }

  app.notFound((c) =>
    c.json(
      {
        error: `ERR not found: ${c.req.path} (supported: POST /, /pipeline, /multi-exec)`,
      },
      404,
    ),
  );

  app.onError((err, c) => {
    if (err instanceof HttpError) return c.json({ error: err.message }, err.status);
    // A bug in the bridge: still answer with JSON so clients report something readable.
    return c.json({ error: `ERR internal bridge error: ${err.message}` }, 500);
  });

  return app;
}

async function readJson(c: Context): Promise<unknown> {
  return parseJsonBody(await c.req.text());
}

function wantsBase64(c: Context): boolean {
  return c.req.header("upstash-encoding")?.trim().toLowerCase() === "base64";
}

function perCommand(outcome: Outcome, base64: boolean): PerCommand {
  // Error texts are never encoded: @upstash/redis only decodes `result`.
  return outcome.ok ? { result: encodeReply(outcome.reply, base64) } : { error: outcome.error };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
