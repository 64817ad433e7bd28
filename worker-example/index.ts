/**
 * The demo worker: locks as an HTTP service, and a counter incremented with a deliberately
 * non-atomic read-modify-write, under the lock or (`?unsafe=1`) without it.
 *
 * Every route needs `Authorization: Bearer <API_SECRET>`. See the README for the API.
 */
import { Hono } from "hono";
import { fencing, initializeFencing } from "../src/fencing/index.js";
import { type LockVariables, withLock } from "../src/hono/index.js";
import {
  AcquireTimeoutError,
  ExtendError,
  FencingError,
  fencedWriteScript,
  InvalidArgumentError,
  LockLostError,
  type NodeOutcome,
  QuorumUnavailableError,
  RateLimitedError,
  type RedisNode,
  Redlock,
  RequestBudgetError,
  restNode,
  ValidityExhaustedError,
} from "../src/index.js";
import { instrument } from "../src/otel/index.js";
import { limitBody } from "./body-limit.js";
import { type Bindings, ConfigError, nodesFromEnv, secretFromEnv } from "./config.js";
import { telemetry } from "./telemetry.js";

type AppEnv = { Bindings: Bindings; Variables: LockVariables };

const RESOURCE = /^[A-Za-z0-9:_.-]{1,128}$/;
const MIN_TTL_MS = 100;
const MAX_TTL_MS = 60_000;
/**
 * Largest accepted request body. The API's bodies are a TTL and a token: a few dozen bytes. A
 * larger body is refused with 413 before it is read into memory or parsed.
 */
const MAX_BODY_BYTES = 16 * 1024;

/** One client per set of bindings (per isolate), built on first use. */
const clients = new WeakMap<object, { redlock: Redlock; fenced: Redlock; store: RedisNode }>();
function client(env: Bindings) {
  let entry = clients.get(env);
  if (!entry) {
    // Nodes are named by position ("node-1", …), not by URL: that name is what reports, errors
    // and every answer of this API show, so the nodes' addresses never leave the worker.
    const nodes = nodesFromEnv(env).map((node, i) => ({ ...node, id: `node-${i + 1}` }));
    // Metrics and spans of every lock (see telemetry.ts); a resource counts by its kind ("counter").
    const { meter, tracer } = telemetry(env);
    const observed = (redlock: Redlock) =>
      instrument(redlock, { meter, tracer, resourceAttribute: ([resource]) => resource?.split(":")[0] });
    entry = {
      redlock: observed(new Redlock({ nodes })),
      // The fenced counter's locks carry fencing tokens; they live under their own key prefix
      // (fencing is for every lock of a prefix or for none).
      fenced: observed(new Redlock({ nodes, fencing, keyPrefix: "fenced:" })),
      // The counter lives on the first node: any Redis would do, the lock is what is shown.
      store: restNode(nodes[0] as { url: string; token: string; id: string }),
    };
    clients.set(env, entry);
  }
  return entry;
}

class HttpError extends Error {
  constructor(
    readonly status: 400 | 401 | 404 | 409 | 413 | 503,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const app = new Hono<AppEnv>();

app.use("*", async (c, next) => {
  const secret = secretFromEnv(c.env);
  const header = c.req.header("authorization") ?? "";
  const given = header.startsWith("Bearer ") ? header.slice(7) : "";
  if (!(await constantTimeEqual(given, secret)))
    throw new HttpError(401, "UNAUTHORIZED", "missing or wrong Bearer token");
  await next();
  telemetry(c.env).flushIfDue((work) => waitUntil(c, work));
});

// After authentication, so an anonymous body is never read at all.
app.use(
  "*",
  limitBody(
    MAX_BODY_BYTES,
    () => new HttpError(413, "BODY_TOO_LARGE", `the body must be at most ${MAX_BODY_BYTES} bytes`),
  ),
);

app.post("/locks/:resource", async (c) => {
  const resource = resourceParam(c.req.param("resource"));
  const { ttlMs } = await jsonBody(c.req.raw, { ttlMs: "ttl" });
  const { redlock } = client(c.env);
  const lock = await redlock.tryAcquire(resource, ttlMs as number);
  waitUntil(c, redlock.settled());
  if (!lock) throw new HttpError(409, "LOCK_HELD", `${resource} is locked by someone else`);
  return c.json(
    {
      resource,
      token: lock.token,
      ttlMs,
      validityMs: Math.floor(lock.remainingMs()),
      expiresAt: new Date(lock.expiresAt).toISOString(),
      nodes: lock.acquireReport.nodes.map(nodeView),
    },
    201,
  );
});

app.post("/locks/:resource/extend", async (c) => {
  const resource = resourceParam(c.req.param("resource"));
  const { token, ttlMs } = await jsonBody(c.req.raw, { token: "string", ttlMs: "ttl" });
  const { redlock } = client(c.env);
  try {
    const report = await redlock.extend(resource, token as string, ttlMs as number);
    return c.json({ resource, validityMs: Math.floor(report.validityMs ?? 0), nodes: report.nodes.map(nodeView) });
  } catch (error) {
    if (error instanceof ExtendError && error.cause instanceof LockLostError) {
      throw new HttpError(409, "LOCK_NOT_HELD", "this token no longer holds the lock");
    }
    // Not a lost lock: nodes failed or answered too slowly. The lock may still be held; retry.
    if (error instanceof ExtendError)
      throw new HttpError(503, error.code, "the lock service is unavailable; try again");
    throw error;
  } finally {
    waitUntil(c, redlock.settled());
  }
});

app.delete("/locks/:resource", async (c) => {
  const resource = resourceParam(c.req.param("resource"));
  const { token } = await jsonBody(c.req.raw, { token: "string" });
  const { redlock } = client(c.env);
  const result = await redlock.release(resource, token as string);
  waitUntil(c, redlock.settled());
  return c.json({ resource, released: result.released, nodes: result.nodes.map(nodeView) });
});

app.get("/locks/:resource", async (c) => {
  const resource = resourceParam(c.req.param("resource"));
  const result = await client(c.env).redlock.inspect(resource);
  return c.json({
    resource,
    nodes: result.nodes.map((n) => ("error" in n ? { node: n.node, error: errorCode(n.error) } : n)),
  });
});

const lockCounter = withLock<AppEnv, "/counter/:name/increment">({
  redlock: (c) => client(c.env).redlock,
  resource: (c) => `counter:${resourceParam(c.req.param("name"))}`,
  // The library's default waiting: requests queue at the counter's gate node and take turns.
  ttlMs: 10_000,
});

app.post(
  "/counter/:name/increment",
  async (c, next) => {
    // `?unsafe=1` skips the lock to show what it prevents.
    if (c.req.query("unsafe") === "1") return increment(c.env, resourceParam(c.req.param("name")), false);
    try {
      return await lockCounter(c, next);
    } finally {
      // Cleanup of failed attempts and slow nodes outlives the response, as on the /locks routes.
      waitUntil(c, client(c.env).redlock.settled());
    }
  },
  async (c) => {
    const lock = c.get("lock");
    const response = await increment(c.env, resourceParam(c.req.param("name")), true);
    response.headers.set("x-lock-attempts", String(lock.acquireReport.attempt));
    return response;
  },
);

const lockFencedCounter = withLock<AppEnv, "/fenced-counter/:name/increment">({
  redlock: (c) => client(c.env).fenced,
  resource: (c) => `counter:${resourceParam(c.req.param("name"))}`,
  ttlMs: 10_000,
});

// Once per deployment: mark the nodes for fencing. Refused (409) when it was done before.
app.post("/fencing/initialize", async (c) => {
  try {
    const result = await initializeFencing(client(c.env).fenced);
    return c.json({ initialized: result.initialized });
  } catch (error) {
    if (error instanceof FencingError && error.code === "FENCING_INIT_REFUSED") {
      return c.json({ error: error.code, message: "fencing was initialised before, or a node is unreachable" }, 409);
    }
    throw error;
  }
});

app.post(
  "/fenced-counter/:name/increment",
  async (c, next) => {
    try {
      return await lockFencedCounter(c, next);
    } finally {
      waitUntil(c, client(c.env).fenced.settled());
    }
  },
  async (c) => {
    const lock = c.get("lock");
    return fencedIncrement(c.env, resourceParam(c.req.param("name")), lock.fence as string, lock.token);
  },
);

/**
 * The same increment, but the write is checked against the lock's fencing token by the store, in
 * one script: a holder whose token is older than the last accepted one (it paused past its lease)
 * is refused with 409 instead of overwriting a newer value.
 */
async function fencedIncrement(env: Bindings, name: string, fence: string, token: string): Promise<Response> {
  const { store } = client(env);
  const key = counterKey(name);
  const value = Number((await store.command(["GET", key], AbortSignal.timeout(5000))) ?? 0);
  await new Promise((resolve) => setTimeout(resolve, 2));
  const reply = await store.command(
    ["EVAL", fencedWriteScript.source, 2, `${key}:fence`, key, fence, token, value + 1],
    AbortSignal.timeout(5000),
  );
  if (!Array.isArray(reply) || reply[0] !== 1) {
    throw new HttpError(409, "STALE_FENCE", "the write carried an older fencing token than the last accepted one");
  }
  return Response.json({ name, value: value + 1, fence });
}

app.get("/counter/:name", async (c) => {
  const name = resourceParam(c.req.param("name"));
  const value = await client(c.env).store.command(["GET", counterKey(name)], AbortSignal.timeout(5000));
  return c.json({ name, value: Number(value ?? 0) });
});

app.delete("/counter/:name", async (c) => {
  const name = resourceParam(c.req.param("name"));
  await client(c.env).store.command(["DEL", counterKey(name), `${counterKey(name)}:fence`], AbortSignal.timeout(5000));
  return c.json({ name, value: 0 });
});

// The metrics as the console exporter writes them, flushed now (`npm run demo` prints them).
app.get("/telemetry", async (c) => c.text(`${(await telemetry(c.env).flush()).join("\n")}\n`));

app.notFound((c) => c.json({ error: "NOT_FOUND", message: `no route for ${c.req.method} ${c.req.path}` }, 404));

app.onError((error, c) => {
  if (error instanceof HttpError) {
    if (error.status === 409 || error.status === 503) c.header("Retry-After", "1");
    return c.json({ error: error.code, message: error.message }, error.status);
  }
  if (error instanceof InvalidArgumentError) return c.json({ error: error.code, message: error.message }, 400);
  if (error instanceof FencingError) {
    c.header("Retry-After", "1");
    return c.json({ error: error.code, message: "fencing is not initialised: POST /fencing/initialize once" }, 503);
  }
  if (
    error instanceof QuorumUnavailableError ||
    error instanceof RequestBudgetError ||
    error instanceof RateLimitedError ||
    error instanceof AcquireTimeoutError ||
    error instanceof ValidityExhaustedError
  ) {
    c.header("Retry-After", "1");
    return c.json({ error: error.code, message: "the lock service is unavailable; try again" }, 503);
  }
  if (error instanceof ConfigError) {
    console.error(`configuration: ${error.message}`);
    return c.json({ error: "CONFIGURATION", message: "the worker is misconfigured" }, 500);
  }
  console.error(error);
  return c.json({ error: "INTERNAL", message: "internal error" }, 500);
});

/**
 * One node's outcome as this API shows it: the node's position name, what it answered, how fast,
 * and the HTTP status or error code when it failed. Error messages stay in the worker's logs.
 */
function nodeView(outcome: NodeOutcome) {
  return {
    node: outcome.node,
    outcome: outcome.outcome,
    ...(outcome.latencyMs === undefined ? {} : { latencyMs: Math.round(outcome.latencyMs * 10) / 10 }),
    ...(outcome.status === undefined ? {} : { status: outcome.status }),
    ...(outcome.error === undefined ? {} : { error: errorCode(outcome.error) }),
  };
}

function errorCode(error: Error): string {
  return "code" in error && typeof error.code === "string" ? error.code : error.name;
}

/** The deliberately non-atomic read-modify-write: GET, a pause, SET. */
async function increment(env: Bindings, name: string, locked: boolean): Promise<Response> {
  const { store } = client(env);
  const key = counterKey(name);
  const value = Number((await store.command(["GET", key], AbortSignal.timeout(5000))) ?? 0);
  await new Promise((resolve) => setTimeout(resolve, 2));
  await store.command(["SET", key, value + 1], AbortSignal.timeout(5000));
  return Response.json({ name, value: value + 1, locked });
}

function counterKey(name: string): string {
  return `demo:counter:${name}`;
}

function resourceParam(value: string): string {
  if (!RESOURCE.test(value)) {
    throw new HttpError(400, "BAD_RESOURCE", "resource names are 1-128 characters of A-Z a-z 0-9 : _ . -");
  }
  return value;
}

type FieldKind = "string" | "ttl";

/** Parse a JSON object body and check the listed fields. */
async function jsonBody(request: Request, fields: Record<string, FieldKind>): Promise<Record<string, unknown>> {
  let body: unknown;
  try {
    body = JSON.parse(await request.text());
  } catch {
    throw new HttpError(400, "BAD_JSON", "the body must be a JSON object");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new HttpError(400, "BAD_JSON", "the body must be a JSON object");
  }
  const record = body as Record<string, unknown>;
  for (const [name, kind] of Object.entries(fields)) {
    const value = record[name];
    if (kind === "string" && (typeof value !== "string" || value.length === 0 || value.length > 256)) {
      throw new HttpError(400, "BAD_FIELD", `"${name}" must be a non-empty string`);
    }
    if (
      kind === "ttl" &&
      !(Number.isInteger(value) && (value as number) >= MIN_TTL_MS && (value as number) <= MAX_TTL_MS)
    ) {
      throw new HttpError(400, "BAD_FIELD", `"${name}" must be an integer from ${MIN_TTL_MS} to ${MAX_TTL_MS}`);
    }
  }
  return record;
}

/** Keep background work (stragglers, cleanup) alive after the response where the runtime allows. */
function waitUntil(c: { executionCtx: { waitUntil(p: Promise<unknown>): void } }, work: Promise<unknown>): void {
  try {
    c.executionCtx.waitUntil(work);
  } catch {
    // No execution context (tests on Node): the promise simply runs on.
  }
}

/** Compare two secrets in time independent of where they differ (SHA-256 both, then XOR). */
async function constantTimeEqual(a: string, b: string): Promise<boolean> {
  const encoder = new TextEncoder();
  const [x, y] = await Promise.all([
    crypto.subtle.digest("SHA-256", encoder.encode(a)),
    crypto.subtle.digest("SHA-256", encoder.encode(b)),
  ]);
  const left = new Uint8Array(x);
  const right = new Uint8Array(y);
  let diff = 0;
  for (let i = 0; i < left.length; i++) diff |= (left[i] as number) ^ (right[i] as number);
  return diff === 0;
}

export default app;
