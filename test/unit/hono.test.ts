/**
 * `edge-redlock/hono`'s withLock on in-memory fake nodes: typed route params and bindings in the
 * `resource` callback, a missing route parameter refused with a 500 that names it (nothing is
 * sent to the nodes), and the existing answers (200 under the lock, 409 when held).
 *
 * The type assertions (`expectTypeOf`) are checked by `npm run typecheck` (tsconfig.tools.json
 * includes test/) and, against the built package, by test/types/hono.ts in the types project.
 */
import { Hono } from "hono";
import { describe, expect, expectTypeOf, it } from "vitest";
import { type LockVariables, withLock } from "../../src/hono/index.js";
import { ConfigurationError, Redlock } from "../../src/index.js";
import { type FakeNode, fakeNodes } from "./support/fake-node.js";

type Bindings = { KEY_PREFIX: string };
type AppEnv = { Bindings: Bindings; Variables: LockVariables };

function setup() {
  const nodes = fakeNodes(3);
  const redlock = new Redlock({ nodes, retryDelay: () => 1, maxAttempts: 2 });
  return { nodes, redlock };
}

/** Every command the fake nodes received. */
const sent = (nodes: FakeNode[]) => nodes.flatMap((n) => n.log);

describe("withLock", () => {
  it("gives the resource callback typed route params and the app's bindings (finding 7)", async () => {
    const { nodes, redlock } = setup();
    const app = new Hono<AppEnv>();
    let seenKey: string | undefined;
    app.post(
      "/orders/:id/pay",
      // Hono's overloads do not pass the route's types into a middleware factory, so they are
      // given here: the app's environment and the route's path.
      withLock<AppEnv, "/orders/:id/pay">({
        redlock,
        ttlMs: 10_000,
        resource: (c) => {
          expectTypeOf(c.req.param("id")).toEqualTypeOf<string>();
          expectTypeOf(c.env).toEqualTypeOf<Bindings>();
          return `${c.env.KEY_PREFIX}order:${c.req.param("id")}`;
        },
      }),
      (c) => {
        seenKey = c.get("lock").resources[0];
        return c.json({ id: c.req.param("id") });
      },
    );
    const response = await app.request("/orders/42/pay", { method: "POST" }, { KEY_PREFIX: "shop:" });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ id: "42" });
    expect(seenKey).toBe("shop:order:42");
    expect(sent(nodes).some((args) => args.includes("shop:order:42"))).toBe(true);
  });

  it.each([
    ["c.req.param(name)", (c: { req: { param(name: string): string | undefined } }) => `order:${c.req.param("id")}`],
    ["c.req.param() destructured", (c: { req: { param(): Record<string, string> } }) => `order:${c.req.param().id}`],
  ])("mounted where the parameter is missing (%s): 500 naming it, nothing sent (finding 7)", async (_, resource) => {
    const { nodes, redlock } = setup();
    const app = new Hono();
    let ran = false;
    // Mounted on a path without ":id": the callback asks for a parameter the route does not have.
    app.post("/orders/pay", withLock({ redlock, ttlMs: 10_000, resource: resource as never }), (c) => {
      ran = true;
      return c.text("paid");
    });
    const response = await app.request("/orders/pay", { method: "POST" });
    expect(response.status).toBe(500);
    const body = (await response.json()) as { error: string; message: string };
    expect(body.error).toBe("MISSING_ROUTE_PARAM");
    expect(body.message).toContain('"id"');
    expect(ran).toBe(false);
    expect(sent(nodes)).toEqual([]);
  });

  it("lets an optional parameter the route declares be absent", async () => {
    const { redlock } = setup();
    const app = new Hono();
    app.post(
      "/reports/:day?",
      withLock({ redlock, ttlMs: 10_000, resource: (c) => `report:${c.req.param("day") ?? "today"}` }),
      (c) => c.text(c.get("lock").resources[0] as string),
    );
    const response = await app.request("/reports", { method: "POST" });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("report:today");
  });

  it("refuses a resource callback that returns no string (500, nothing sent)", async () => {
    const { nodes, redlock } = setup();
    const app = new Hono();
    app.post("/x", withLock({ redlock, ttlMs: 10_000, resource: () => [undefined as unknown as string] }), (c) =>
      c.text("ran"),
    );
    const response = await app.request("/x", { method: "POST" });
    expect(response.status).toBe(500);
    expect(await response.json()).toMatchObject({ error: "MISSING_ROUTE_PARAM" });
    expect(sent(nodes)).toEqual([]);
  });

  it("keeps its answers: 200 under the lock, 409 with Retry-After when it is held", async () => {
    const { nodes, redlock } = setup();
    for (const node of nodes) node.occupy("busy:1");
    const app = new Hono();
    app.post("/busy/:id", withLock({ redlock, ttlMs: 10_000, resource: (c) => `busy:${c.req.param("id")}` }), (c) =>
      c.text("ran"),
    );
    const held = await app.request("/busy/1", { method: "POST" });
    expect(held.status).toBe(409);
    expect(held.headers.get("retry-after")).toBe("1");
    expect(await held.json()).toMatchObject({ error: "LOCK_HELD" });
    const free = await app.request("/busy/2", { method: "POST" });
    expect(free.status).toBe(200);
    expect(await free.text()).toBe("ran");
  });
});

describe("withLock: the developer's mistakes and the failure path", () => {
  it.each([
    ["a TTL of 0", { ttlMs: 0 }],
    ["an option typo", { ttlMs: 10_000, retryDelayMs: 5 }],
  ])("%s fails when the app is built, as a ConfigurationError, not later as a 400", (_, given) => {
    const { redlock } = setup();
    const build = () => withLock({ redlock, resource: () => "r", ...(given as { ttlMs: number }) });
    expect(build).toThrow(ConfigurationError);
  });

  it("a failed acquisition hands the client's background work to the platform's waitUntil", async () => {
    const { nodes, redlock } = setup();
    for (const n of nodes) n.occupy("r");
    const kept: Promise<unknown>[] = [];
    const app = new Hono();
    app.post("/r", withLock({ redlock, ttlMs: 10_000, resource: () => "r" }), (c) => c.text("ran"));
    const executionCtx = {
      waitUntil: (p: Promise<unknown>) => kept.push(p),
      passThroughOnException: () => {},
      props: {},
    };
    const response = await app.request("/r", { method: "POST" }, {}, executionCtx);
    expect(response.status).toBe(409);
    expect(kept.length).toBeGreaterThanOrEqual(1);
    await Promise.all(kept);
  });
});

describe("withLock: whose mistake an invalid argument is", () => {
  it("a bad resource name from the request is a 400; an option that does not fit the nodes is the route's, a 500", async () => {
    const { redlock } = setup();
    const app = new Hono();
    app.post(
      "/by-name/:name",
      withLock({ redlock, ttlMs: 10_000, resource: (c) => `x${c.req.param("name") ?? ""}`.slice(1) }),
      (c) => c.text("ran"),
    );
    app.post("/quorum", withLock({ redlock, ttlMs: 10_000, resource: () => "q", quorum: 7 }), (c) => c.text("ran"));
    const tooLong = "n".repeat(2000);
    const byName = await app.request(`/by-name/${tooLong}`, { method: "POST" });
    expect(byName.status).toBe(400);
    const misconfigured = await app.request("/quorum", { method: "POST" });
    expect(misconfigured.status).toBe(500);
    expect(await misconfigured.json()).toMatchObject({ error: "INVALID_ARGUMENT" });
  });
});
