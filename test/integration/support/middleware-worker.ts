/**
 * A worker for test/integration/middleware-request.test.ts: the Hono middleware's failure paths in
 * workerd. `POST /locked/:name` runs under `withLock` (a short patience: 2 attempts), `POST
 * /bare/:name` acquires the same way without the middleware and without handing anything to
 * `waitUntil` (the negative control), and `GET /settled` answers what `settled()` reports.
 */
import { Hono } from "hono";
import { withLock } from "../../../src/hono/index.js";
import { Redlock } from "../../../src/index.js";

type Bindings = { NODES: string };

let redlock: Redlock | undefined;
const client = (env: Bindings): Redlock => {
  redlock ??= new Redlock({
    nodes: JSON.parse(env.NODES),
    maxAttempts: 2,
    retryBaseDelayMs: 50,
    requestTimeoutMs: 300,
  });
  return redlock;
};

const app = new Hono<{ Bindings: Bindings }>();
app.post(
  "/locked/:name",
  withLock<{ Bindings: Bindings }, "/locked/:name">({
    redlock: (c) => client(c.env),
    resource: (c) => c.req.param("name"),
    ttlMs: 3000,
  }),
  (c) => c.text("ran"),
);
app.post("/bare/:name", async (c) => {
  const lock = await client(c.env)
    .acquire(c.req.param("name"), 3000)
    .catch(() => undefined);
  if (lock) await lock.release();
  return c.json({ error: lock ? undefined : "held" }, lock ? 200 : 409);
});
app.get("/settled", async (c) => c.json(await client(c.env).settled()));

export default app;
