/**
 * End to end: the demo worker running in workerd (wrangler's unstable_startWorker) against the
 * real local nodes.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { unstable_startWorker } from "wrangler";
import { type NodeCluster, startNodes } from "../../tools/nodes/index.js";
import { uniqueKey } from "./support/nodes.js";

process.env.WRANGLER_SEND_METRICS = "false";
process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";

const SECRET = "e2e-secret";
const REQUESTS = 60;

type Worker = Awaited<ReturnType<typeof unstable_startWorker>>;

async function start(nodes: { url: string; token: string }[]): Promise<{ worker: Worker; base: string }> {
  const worker = await unstable_startWorker({
    config: "wrangler.toml",
    bindings: {
      REDLOCK_NODES: { type: "plain_text", value: JSON.stringify(nodes) },
      API_SECRET: { type: "plain_text", value: SECRET },
    },
    dev: { server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: "error" },
  });
  await worker.ready;
  return { worker, base: String(await worker.url).replace(/\/$/, "") };
}

describe("the demo worker in workerd", () => {
  let worker: Worker;
  let base: string;
  const call = (method: string, path: string, body?: unknown, token = SECRET) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
    });

  beforeAll(async () => {
    ({ worker, base } = await start(inject("nodes")));
  });
  afterAll(async () => {
    await worker?.dispose();
  });

  it("the locked counter ends at exactly the number of requests; the unsafe one loses updates", async () => {
    const locked = uniqueKey("locked").replaceAll(":", "-");
    const unsafe = uniqueKey("unsafe").replaceAll(":", "-");
    const fire = (name: string, query = "") =>
      Promise.all(Array.from({ length: REQUESTS }, () => call("POST", `/counter/${name}/increment${query}`)));
    const lockedAnswers = await fire(locked);
    expect(lockedAnswers.map((r) => r.status)).toEqual(Array(REQUESTS).fill(200));
    const unsafeAnswers = await fire(unsafe, "?unsafe=1");
    expect(unsafeAnswers.map((r) => r.status)).toEqual(Array(REQUESTS).fill(200));
    expect(await (await call("GET", `/counter/${locked}`)).json()).toEqual({ name: locked, value: REQUESTS });
    const { value } = (await (await call("GET", `/counter/${unsafe}`)).json()) as { value: number };
    expect(value).toBeLessThan(REQUESTS);
  });

  it("the fenced counter: initialise once (a second time is refused), then every write carries a larger fence", async () => {
    const name = uniqueKey("fenced").replaceAll(":", "-");
    const before = await call("POST", `/fenced-counter/${name}/increment`);
    // Another test may have initialised these nodes already; either way the second call is refused.
    if (before.status === 503) expect(((await before.json()) as { error: string }).error).toBe("FENCING_UNINITIALIZED");
    const first = await call("POST", "/fencing/initialize");
    expect([200, 409]).toContain(first.status);
    expect((await call("POST", "/fencing/initialize")).status).toBe(409);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => call("POST", `/fenced-counter/${name}/increment`)),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200));
    const bodies = (await Promise.all(answers.map((r) => r.json()))) as { value: number; fence: string }[];
    // In the order the writes were applied (the counter's value), the fences strictly increase.
    const byValue = [...bodies].sort((a, b) => a.value - b.value);
    expect(byValue.map((b) => b.value).slice(-1)[0]).toBe(bodies.length + (before.status === 200 ? 1 : 0));
    for (let i = 1; i < byValue.length; i++) {
      expect(BigInt(byValue[i]!.fence) > BigInt(byValue[i - 1]!.fence)).toBe(true);
    }
  });

  it("locks as a service: acquire 201, a second acquire 409, inspect, extend, release", async () => {
    const resource = uniqueKey("svc").replaceAll(":", "-");
    const first = await call("POST", `/locks/${resource}`, { ttlMs: 10_000 });
    expect(first.status).toBe(201);
    const { token, nodes } = (await first.json()) as { token: string; nodes: { outcome: string }[] };
    expect(nodes.filter((n) => n.outcome === "acquired").length).toBeGreaterThanOrEqual(3);

    const second = await call("POST", `/locks/${resource}`, { ttlMs: 10_000 });
    expect(second.status).toBe(409);
    expect(second.headers.get("retry-after")).toBe("1");
    expect(await second.json()).toMatchObject({ error: "LOCK_HELD" });

    const view = (await (await call("GET", `/locks/${resource}`)).json()) as { nodes: { value?: string }[] };
    // The holder's token is a capability: the demo shows it by its last 4 characters, never whole.
    expect(view.nodes.every((n) => n.value === `…${token.slice(-4)}`)).toBe(true);
    expect(JSON.stringify(view)).not.toContain(token);

    const extended = await call("POST", `/locks/${resource}/extend`, { token, ttlMs: 20_000 });
    expect(extended.status).toBe(200);
    expect(((await extended.json()) as { validityMs: number }).validityMs).toBeGreaterThan(15_000);

    const wrongToken = await call("POST", `/locks/${resource}/extend`, { token: "nope", ttlMs: 20_000 });
    expect(wrongToken.status).toBe(409);

    const released = await call("DELETE", `/locks/${resource}`, { token });
    expect(((await released.json()) as { released: number }).released).toBeGreaterThanOrEqual(3);
    expect((await call("POST", `/locks/${resource}`, { ttlMs: 1000 })).status).toBe(201);
  });

  it.each([
    ["a missing token", () => fetch(`${base}/counter/x`)],
    ["a wrong token", () => call("GET", "/counter/x", undefined, "wrong")],
  ])("401 JSON for %s", async (_, send) => {
    const response = await send();
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: "UNAUTHORIZED" });
  });

  it.each([
    ["malformed JSON", "/locks/r1", "{not json"],
    ["a non-object body", "/locks/r1", "[1,2]"],
    ["a TTL out of bounds", "/locks/r1", { ttlMs: 10 }],
    ["a fractional TTL", "/locks/r1", { ttlMs: 1000.5 }],
    ["a bad resource name", "/locks/bad%20name", { ttlMs: 1000 }],
    ["an oversized resource name", `/locks/${"x".repeat(129)}`, { ttlMs: 1000 }],
  ])("400 JSON for %s", async (_, path, body) => {
    const response = await call("POST", path, body);
    expect(response.status).toBe(400);
    const json = (await response.json()) as { error: string; message: string };
    expect(json.error).toMatch(/^BAD_/);
    expect(JSON.stringify(json)).not.toMatch(/\bat .*\.(ts|js):\d+/);
  });

  it("413 JSON for a body over the limit, before it is parsed (finding 8)", async () => {
    for (const path of ["/locks/big", "/locks/big/extend"]) {
      const response = await call("POST", path, JSON.stringify({ ttlMs: 1000, pad: "x".repeat(1024 * 1024) }));
      expect(response.status).toBe(413);
      expect(await response.json()).toMatchObject({ error: "BODY_TOO_LARGE" });
    }
    // A body without a length (streamed) is cut off at the limit as well. Small enough (24 KiB)
    // to be written whole before the answer comes, so the early 413 cannot reset the upload.
    const chunk = new TextEncoder().encode("x".repeat(8 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 3) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const streamed = await fetch(`${base}/locks/big`, {
      method: "POST",
      headers: { authorization: `Bearer ${SECRET}` },
      body: stream,
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
    // A body within the limit still works.
    const small = await call("POST", `/locks/${uniqueKey("small").replaceAll(":", "-")}`, { ttlMs: 10_000 });
    expect({ status: small.status, body: await small.text() }).toMatchObject({ status: 201 });
  });

  it("answers name nodes by position, never by URL (finding 8)", async () => {
    const endpoints = inject("nodes");
    const resource = uniqueKey("urls").replaceAll(":", "-");
    const bodies: string[] = [];
    const acquired = await call("POST", `/locks/${resource}`, { ttlMs: 10_000 });
    const acquiredText = await acquired.text();
    bodies.push(acquiredText);
    const { token, nodes } = JSON.parse(acquiredText) as { token: string; nodes: { node: string; outcome: string }[] };
    expect(nodes.map((n) => n.node)).toEqual(endpoints.map((_, i) => `node-${i + 1}`));
    bodies.push(await (await call("GET", `/locks/${resource}`)).text());
    bodies.push(await (await call("POST", `/locks/${resource}/extend`, { token, ttlMs: 10_000 })).text());
    bodies.push(await (await call("DELETE", `/locks/${resource}`, { token })).text());
    for (const body of bodies) {
      for (const { url, token: nodeToken } of endpoints) {
        expect(body).not.toContain(new URL(url).host);
        expect(body).not.toContain(nodeToken);
      }
      expect(body).not.toMatch(/127\.0\.0\.1|localhost/);
    }
  });

  it("404 JSON for an unknown route", async () => {
    const response = await call("GET", "/nope");
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: "NOT_FOUND" });
  });
});

describe("the demo worker with its nodes down", () => {
  let cluster: NodeCluster;
  let worker: Worker;
  let base: string;

  beforeAll(async () => {
    cluster = await startNodes({ count: 3 });
    ({ worker, base } = await start(cluster.nodes.map(({ url, token }) => ({ url, token }))));
  });
  afterAll(async () => {
    await worker?.dispose();
    await cluster?.stop();
  });

  it("503 JSON with Retry-After when no quorum can be formed: acquire, extend, counter (finding 8)", async () => {
    const headers = { authorization: `Bearer ${SECRET}`, "content-type": "application/json" };
    const held = await fetch(`${base}/locks/down-lock`, { method: "POST", headers, body: '{"ttlMs":30000}' });
    expect(held.status).toBe(201);
    const { token } = (await held.json()) as { token: string };
    await cluster.kill(0);
    await cluster.kill(1);
    const answers = {
      counter: await fetch(`${base}/counter/down/increment`, { method: "POST", headers }),
      acquire: await fetch(`${base}/locks/down-other`, { method: "POST", headers, body: '{"ttlMs":30000}' }),
      extend: await fetch(`${base}/locks/down-lock/extend`, {
        method: "POST",
        headers,
        body: JSON.stringify({ token, ttlMs: 30_000 }),
      }),
    };
    for (const [route, response] of Object.entries(answers)) {
      expect({ route, status: response.status }).toEqual({ route, status: 503 });
      expect(response.headers.get("retry-after")).toBe("1");
      expect(await response.json()).toMatchObject({
        // With two of three nodes down, the request budget may end the retries first.
        error: expect.stringMatching(/QUORUM_UNAVAILABLE|ACQUIRE_TIMEOUT|EXTEND_FAILED|REQUEST_BUDGET/),
      });
    }
  }, 60_000);
});
