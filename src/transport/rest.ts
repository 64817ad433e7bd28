/**
 * How commands reach a node. A node is anything with an id and a `command` method; `restNode`
 * speaks the Upstash REST protocol over `fetch`. Transports never retry: a retried `SET NX` can
 * land after the client gave up, and a retry's latency would eat the lock's validity unseen.
 * @module
 */
import { ConfigurationError, NodeError } from "../base/errors.js";
import { commandSecrets, describeBody, redact } from "../base/redact.js";

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
   * Once the returned promise settles, stop reacting to `signal`: a signal that never aborted is
   * handed to a later command.
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
  if (typeof config !== "object" || config === null) throw new ConfigurationError("a node must be { url, token }");
  const url = parseNodeUrl(config.url);
  if (typeof config.token !== "string" || config.token.length === 0) {
    throw new ConfigurationError(`node ${url.origin} has no token`);
  }
  const id = config.id ?? `${url.origin}${url.pathname.replace(/\/$/, "")}`;
  const endpoint = url.href;
  const token = config.token;
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const doFetch = config.fetch ?? ((input, init) => globalThis.fetch(input, init));

  return {
    id,
    async command(args, signal) {
      let response: Response;
      let text: string;
      try {
        // A lock node is reached directly, never through a redirect: a redirect could hand our
        // request (and its lock token) to another origin whose answers would count as votes.
        response = await doFetch(endpoint, {
          method: "POST",
          headers,
          body: JSON.stringify(args),
          signal,
          redirect: "manual",
        });
        text = await response.text();
      } catch (cause) {
        // An abort is the caller's business (deadline or cancel): rethrow its reason untouched.
        if (signal.aborted) throw signal.reason;
        const secrets = [token, ...commandSecrets(args)];
        throw new NodeError(id, `request to ${id} failed: ${redact(describe(cause), secrets)}`, {
          cause: sanitize(cause, secrets),
        });
      }
      if (isRedirect(response)) throw redirectError(id, url, response);
      if (response.status === 429) {
        const retryAfterMs = retryAfter(response.headers.get("retry-after"));
        throw new NodeError(id, `${id} is rate-limited (HTTP 429)`, {
          status: 429,
          ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
        });
      }
      return parseReply(id, response.status, text, [token, ...commandSecrets(args)]);
    },
  };
}

/**
 * Validate a node's REST URL without ever echoing it: it may carry a password.
 * @throws {ConfigurationError}
 */
function parseNodeUrl(value: unknown): URL {
  if (typeof value !== "string" || value.length === 0) {
    throw new ConfigurationError(
      "node url must be the REST URL of a Redis database, e.g. https://eu1-example.upstash.io",
    );
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigurationError(
      "node url is not a valid URL (it is not shown here, as it may carry a secret); pass the REST URL, e.g. https://eu1-example.upstash.io",
    );
  }
  if (url.protocol === "redis:" || url.protocol === "rediss:") {
    throw new ConfigurationError(
      `node url is a Redis connection URL (${url.protocol}//…); edge-redlock speaks Redis REST: pass the REST URL (https://…) and the REST token of the database instead`,
    );
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ConfigurationError(`node url must be an http(s) REST URL, not ${url.protocol}//…`);
  }
  if (url.username || url.password) {
    throw new ConfigurationError(`node url ${url.origin} must not carry credentials; pass the token separately`);
  }
  return url;
}

function isRedirect(response: Response): boolean {
  return response.type === "opaqueredirect" || (response.status >= 300 && response.status < 400);
}

/** A redirect is a node error that says where it pointed (its origin only) and what to do. */
function redirectError(id: string, url: URL, response: Response): NodeError {
  let target: URL | undefined;
  try {
    const location = response.headers.get("location");
    if (location) target = new URL(location, url);
  } catch {
    target = undefined;
  }
  const status = response.status || undefined;
  const where = target ? ` to ${target.origin}` : "";
  const hint =
    target && url.protocol === "http:" && target.protocol === "https:" && target.host === url.host
      ? `; use ${target.origin} (https) as the node URL`
      : "; lock nodes are never followed through redirects: configure the final REST URL";
  return new NodeError(id, `${id} answered with a redirect (HTTP ${status ?? "3xx"})${where}${hint}`, {
    ...(status === undefined ? {} : { status }),
  });
}

/**
 * Parse a REST answer strictly. Anything but `{"result": <reply>}` with a 2xx status is an error:
 * an HTML error page, truncated JSON or a reply of an unexpected type is never mistaken for a grant.
 * Messages never echo the body (a proxy may reflect the Authorization header): only the Redis
 * error text of an Upstash error answer, with `secrets` redacted.
 */
export function parseReply(id: string, status: number, text: string, secrets: readonly string[] = []): RedisReply {
  if (status === 401 || status === 403) {
    throw new ConfigurationError(`node ${id} rejected the token (HTTP ${status})`, {
      node: id,
      status,
      cause: new NodeError(id, `HTTP ${status}`, { status }),
    });
  }
  // No Redis REST endpoint at this URL: its path is wrong (or it is another service). Retrying
  // cannot help; say so at once.
  if (status === 404 || status === 405) {
    throw new ConfigurationError(
      `node ${id} answered HTTP ${status}: its URL is not a Redis REST endpoint (check the URL's path)`,
      { node: id, status, cause: new NodeError(id, `HTTP ${status}`, { status }) },
    );
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    // A web page where a REST answer should be: the URL leads somewhere else. (Truncated JSON
    // may be a network fault: a node error, as usual.)
    if (status >= 200 && status < 300 && /^\s*<(!doctype|html)/i.test(text)) {
      throw new ConfigurationError(
        `node ${id} answered ${describeBody(text)} with HTTP ${status}: its URL is not a Redis REST endpoint`,
        { node: id, status, cause: new NodeError(id, `HTTP ${status}`, { status }) },
      );
    }
    throw new NodeError(id, `unparsable answer from ${id} (HTTP ${status}): ${describeBody(text)}`, { status });
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new NodeError(id, `unexpected answer from ${id} (HTTP ${status}): ${describeBody(text)}`, { status });
  }
  const record = body as Record<string, unknown>;
  if (typeof record.error === "string") {
    const redisError = redact(record.error, secrets).slice(0, MAX_ERROR_SNIPPET);
    throw new NodeError(id, `${id} answered with an error (HTTP ${status}): ${redisError}`, { status, redisError });
  }
  if (status < 200 || status > 299) {
    throw new NodeError(id, `HTTP ${status} from ${id}: ${describeBody(text)}`, { status });
  }
  if (!("result" in record) || !isReply(record.result)) {
    throw new NodeError(id, `answer from ${id} has no valid result: ${describeBody(text)}`, { status });
  }
  return record.result;
}

/** A `Retry-After` header (seconds, or an HTTP date) in ms, capped at a minute; undefined when absent or unreadable. */
function retryAfter(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = Number(header);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(header) - Date.now();
  return Number.isFinite(ms) ? Math.min(Math.max(0, Math.round(ms)), 60_000) : undefined;
}

/** Whether `value` has the shape of a Redis reply in JSON. */
export function isReply(value: unknown): value is RedisReply {
  if (value === null || typeof value === "string") return true;
  if (typeof value === "number") return Number.isFinite(value);
  return Array.isArray(value) && value.every(isReply);
}

/** A copy of an error chain with secrets redacted from every message (stacks are dropped). */
function sanitize(error: unknown, secrets: readonly string[], depth = 0): Error {
  const message = error instanceof Error ? error.message : String(error);
  const cause =
    error instanceof Error && error.cause !== undefined && depth < 4
      ? sanitize(error.cause, secrets, depth + 1)
      : undefined;
  const copy = new Error(redact(message, secrets), cause === undefined ? undefined : { cause });
  copy.name = error instanceof Error ? error.name : "Error";
  return copy;
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? ` (${error.cause.message})` : "";
    return `${error.message}${cause}`;
  }
  return String(error);
}
