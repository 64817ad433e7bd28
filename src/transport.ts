/**
 * How commands reach a node. A node is anything with an id and a `command` method; `restNode`
 * speaks the Upstash REST protocol over `fetch`. Transports never retry: a retried `SET NX` can
 * land after the client gave up, and a retry's latency would eat the lock's validity unseen.
 * @module
 */
import { ConfigurationError, NodeError } from "./errors.js";

/** One argument of a Redis command. Numbers travel as JSON numbers. */
export type RedisArgument = string | number;

/** A Redis reply as JSON: a string, an integer, null, or an array of replies. */
export type RedisReply = string | number | null | RedisReply[];

/** One independent Redis node. */
export interface RedisNode {
  /** Stable identifier used in outcomes and errors (for REST nodes, the URL without credentials). */
  readonly id: string;
  /**
   * Send one command and return the reply. Must send at most one request, honour `signal`, and
   * reject with a {@link NodeError} (or a {@link ConfigurationError} for rejected credentials).
   */
  command(args: readonly RedisArgument[], signal: AbortSignal): Promise<RedisReply>;
}

/** A node reached through a Redis REST endpoint (Upstash protocol). */
export interface RestNodeConfig {
  /** The REST URL, e.g. `https://eu1-example.upstash.io`. */
  readonly url: string;
  /** The REST token (the Standard token: locks need writes). Sent as `Authorization: Bearer`. */
  readonly token: string;
  /** Identifier in outcomes and errors. @default the URL's origin and path */
  readonly id?: string;
  /** The `fetch` to use, e.g. an instrumented one in tests. @default globalThis.fetch */
  readonly fetch?: typeof fetch;
}

const MAX_ERROR_SNIPPET = 120;

/**
 * Create a node that talks to a Redis REST endpoint with one `POST` per command.
 * @throws {ConfigurationError} when the URL is not an absolute http(s) URL or the token is empty.
 */
export function restNode(config: RestNodeConfig): RedisNode {
  let url: URL;
  try {
    url = new URL(config.url);
  } catch (cause) {
    throw new ConfigurationError(`node URL is not a valid URL: ${JSON.stringify(String(config.url))}`, { cause });
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ConfigurationError(`node URL must be http(s): ${url.origin}`);
  }
  if (url.username || url.password) {
    throw new ConfigurationError("node URL must not carry credentials; pass the token separately");
  }
  if (typeof config.token !== "string" || config.token.length === 0) {
    throw new ConfigurationError(`node ${url.origin} has no token`);
  }
  const id = config.id ?? `${url.origin}${url.pathname.replace(/\/$/, "")}`;
  const endpoint = url.href;
  const headers = { authorization: `Bearer ${config.token}`, "content-type": "application/json" };
  const doFetch = config.fetch ?? ((input, init) => globalThis.fetch(input, init));

  return {
    id,
    async command(args, signal) {
      let response: Response;
      let text: string;
      try {
        response = await doFetch(endpoint, { method: "POST", headers, body: JSON.stringify(args), signal });
        text = await response.text();
      } catch (cause) {
        // An abort is the caller's business (deadline or cancel): rethrow its reason untouched.
        if (signal.aborted) throw signal.reason;
        throw new NodeError(id, `request to ${id} failed: ${describe(cause)}`, { cause });
      }
      return parseReply(id, response.status, text);
    },
  };
}

/**
 * Parse a REST answer strictly. Anything but `{"result": <reply>}` with a 2xx status is an error:
 * an HTML error page, truncated JSON or a reply of an unexpected type is never mistaken for a grant.
 */
export function parseReply(id: string, status: number, text: string): RedisReply {
  if (status === 401 || status === 403) {
    throw new ConfigurationError(`node ${id} rejected the token (HTTP ${status}): ${snippet(text)}`, {
      node: id,
      cause: new NodeError(id, `HTTP ${status}`, { status }),
    });
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (cause) {
    throw new NodeError(id, `unparsable answer from ${id} (HTTP ${status}): ${snippet(text)}`, { status, cause });
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new NodeError(id, `unexpected answer from ${id} (HTTP ${status}): ${snippet(text)}`, { status });
  }
  const record = body as Record<string, unknown>;
  if (typeof record.error === "string") {
    throw new NodeError(id, `${id} answered with an error (HTTP ${status}): ${record.error}`, {
      status,
      redisError: record.error,
    });
  }
  if (status < 200 || status > 299) {
    throw new NodeError(id, `HTTP ${status} from ${id}: ${snippet(text)}`, { status });
  }
  if (!("result" in record) || !isReply(record.result)) {
    throw new NodeError(id, `answer from ${id} has no valid result: ${snippet(text)}`, { status });
  }
  return record.result;
}

/** Whether `value` has the shape of a Redis reply in JSON. */
export function isReply(value: unknown): value is RedisReply {
  if (value === null || typeof value === "string") return true;
  if (typeof value === "number") return Number.isFinite(value);
  return Array.isArray(value) && value.every(isReply);
}

function snippet(text: string): string {
  const oneLine = text.replace(/\s+/g, " ").trim();
  return oneLine.length > MAX_ERROR_SNIPPET ? `${oneLine.slice(0, MAX_ERROR_SNIPPET)}…` : oneLine || "(empty body)";
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? ` (${error.cause.message})` : "";
    return `${error.message}${cause}`;
  }
  return String(error);
}
