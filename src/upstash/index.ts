/**
 * Use `@upstash/redis` clients as Redlock nodes.
 *
 * The `Redis` client retries a failed request 5 times with exponential backoff (about 4.3 s) and
 * has no per-request deadline; either would stretch an acquisition past its validity, and a
 * retried `SET NX` can land after the client gave up. So this adapter does not go through the
 * client's commands: it sends each command once through the client's own HTTP requester with
 * retries turned off for our requests only, under our per-request deadline, and without
 * auto-pipelining or JSON deserialization. Your `Redis` instance keeps its own settings.
 *
 * @example
 * ```ts
 * import { Redis } from "@upstash/redis";
 * import { Redlock } from "edge-redlock";
 * import { upstashNodes } from "edge-redlock/upstash";
 * const redlock = new Redlock({ nodes: upstashNodes([Redis.fromEnv(), new Redis({ url, token }), ...]) });
 * ```
 * @module edge-redlock/upstash
 */
import { ConfigurationError, NodeError } from "../base/errors.js";
import { commandSecrets, redact } from "../base/redact.js";
import { isReply, type RedisNode, type RedisReply } from "../transport/rest.js";

/** Any `Redis` instance from `@upstash/redis` (the Node, Cloudflare or Fastly entry point). */
export interface UpstashRedis {
  /** Present on every `@upstash/redis` client: it gives the type its shape (the adapter never calls it). */
  eval(...args: never[]): unknown;
}

/** Options of {@link upstashNode}. */
export interface UpstashNodeOptions {
  /** Identifier in outcomes and errors. @default the client's REST URL */
  readonly id?: string;
}

interface Requester {
  baseUrl?: unknown;
  retry?: unknown;
  request(request: { body: unknown; signal?: unknown }): Promise<{ result?: unknown; error?: unknown }>;
}

const CREDENTIAL_ERROR = /WRONGPASS|unauthori[sz]ed|NOPERM|invalid or missing auth token/i;

/**
 * Wrap one `@upstash/redis` `Redis` instance as a Redlock node.
 * @throws {ConfigurationError} when `redis` is not an `@upstash/redis` client this adapter understands.
 */
export function upstashNode(redis: UpstashRedis, options: UpstashNodeOptions = {}): RedisNode {
  const client = (redis as { client?: Partial<Requester> } | null)?.client;
  if (!client || typeof client.request !== "function") {
    throw new ConfigurationError("upstashNode() needs a Redis instance from @upstash/redis (≥ 1.34)");
  }
  // A view of the client whose own `retry` sends every request exactly once. Only our requests
  // go through it; the user's instance is untouched.
  const requester = Object.create(client, {
    retry: { value: Object.freeze({ attempts: 0, backoff: () => 0 }), writable: true },
  }) as Requester;
  const id = options.id ?? (typeof client.baseUrl === "string" ? client.baseUrl : undefined);
  if (!id) throw new ConfigurationError("upstashNode(): the client has no URL; pass options.id");

  return {
    id,
    async command(args, signal) {
      let answer: { result?: unknown; error?: unknown };
      try {
        // The function form matters: with a plain signal the client turns an abort into a fake
        // successful answer; with a function it throws.
        answer = await requester.request({ body: args, signal: () => signal });
      } catch (thrown) {
        if (signal.aborted) throw signal.reason;
        // @upstash/redis appends ", command was: [...]" to its messages: the command carries the
        // lock token, which must never reach a log. Keep only the error itself, redacted, and
        // do not chain the original error.
        const secrets = [...commandSecrets(args), ...clientSecrets(client)];
        const raw = thrown instanceof Error ? thrown.message : String(thrown);
        const message = redact(raw.split(", command was:")[0] as string, secrets);
        const cause = Object.assign(new Error(message), { name: thrown instanceof Error ? thrown.name : "Error" });
        if (CREDENTIAL_ERROR.test(message)) {
          throw new ConfigurationError(`node ${id} rejected the token: ${message}`, { node: id, cause });
        }
        const redisError = (thrown as { name?: string })?.name === "UpstashError" ? message : undefined;
        throw new NodeError(id, `request to ${id} failed: ${message}`, {
          cause,
          ...(redisError ? { redisError } : {}),
        });
      }
      if (typeof answer?.error === "string") {
        const redisError = redact(answer.error, [...commandSecrets(args), ...clientSecrets(client)]);
        throw new NodeError(id, `${id} answered with an error: ${redisError}`, { redisError });
      }
      if (!isReply(answer?.result)) {
        throw new NodeError(id, `answer from ${id} has no valid result`);
      }
      return answer.result as RedisReply;
    },
  };
}

/** The client's REST token, from its Authorization header, to redact from messages. */
function clientSecrets(client: Partial<Requester> & { headers?: unknown }): string[] {
  const headers = client.headers as Record<string, unknown> | undefined;
  const authorization = headers?.authorization ?? headers?.Authorization;
  if (typeof authorization !== "string") return [];
  return [authorization, authorization.replace(/^Bearer\s+/i, "")];
}

/** Wrap several `@upstash/redis` clients, one per independent database. */
export function upstashNodes(clients: readonly UpstashRedis[]): RedisNode[] {
  return clients.map((redis) => upstashNode(redis));
}
