/**
 * `edge-redlock/upstash`: unmodified @upstash/redis clients (default config: retries,
 * auto-pipelining, base64) as nodes, against the real local nodes.
 */
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ConfigurationError, Redlock } from "../../src/index.js";
import { upstashNode, upstashNodes } from "../../src/upstash/index.js";
import { type NodeCluster, startNodes } from "../../tools/nodes/index.js";
import { type Stub, startStub } from "./support/http-stub.js";
import { uniqueKey } from "./support/nodes.js";

const nodes = inject("nodes");
const clients = () => nodes.map((n) => new Redis({ url: n.url, token: n.token, enableTelemetry: false }));

describe("@upstash/redis clients as nodes", () => {
  let fresh: NodeCluster;
  beforeAll(async () => {
    fresh = await startNodes({ count: 3 });
  });
  afterAll(async () => {
    await fresh?.stop();
  });

  it("acquire, inspect, extend and release", async () => {
    const redlock = new Redlock({ nodes: upstashNodes(clients()) });
    const key = uniqueKey("upstash");
    const lock = await redlock.acquire(key, 5000);
    const view = await redlock.inspect(key, { revealTokens: true });
    expect(view.nodes.every((n) => "value" in n && n.value === lock.token)).toBe(true);
    await lock.extend(10_000);
    const released = await lock.release();
    expect(released.released).toBeGreaterThanOrEqual(3);
    await redlock.settled();
    const after = await redlock.inspect(key);
    expect(after.nodes.every((n) => "value" in n && n.value === null)).toBe(true);
  });

  it("falls back from EVALSHA to EVAL on nodes with an empty script cache", async () => {
    const redis = fresh.nodes.map((n) => new Redis({ url: n.url, token: n.token, enableTelemetry: false }));
    const redlock = new Redlock({ nodes: upstashNodes(redis) });
    const lock = await redlock.acquire([uniqueKey("m1"), uniqueKey("m2")], 5000);
    const answered = lock.acquireReport.nodes.filter((n) => n.outcome === "acquired");
    expect(answered.length).toBeGreaterThanOrEqual(2);
    expect(answered.every((n) => n.requests === 2)).toBe(true);
    await lock.release();
  });

  it("a wrong token is a ConfigurationError", async () => {
    const redis = nodes.map((n) => new Redis({ url: n.url, token: "wrong", enableTelemetry: false }));
    const error = await new Redlock({ nodes: upstashNodes(redis) }).acquire(uniqueKey("tok"), 5000).catch((e) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
  });

  it("rejects something that is not an @upstash/redis client", () => {
    expect(() => upstashNode({ eval: () => 1 } as never)).toThrow(ConfigurationError);
  });
});

describe("the client's retries do not stretch an acquisition", () => {
  let dropper: Stub;
  beforeAll(async () => {
    dropper = await startStub((req) => req.socket.destroy());
  });
  afterAll(async () => {
    await dropper.close();
  });

  it("the bare client retries a dropped request 5 times (what we must neutralise)", async () => {
    const redis = new Redis({ url: dropper.url, token: "t", enableTelemetry: false });
    const before = dropper.connections();
    await expect(redis.get("k")).rejects.toThrow();
    expect(dropper.connections() - before).toBe(6);
  }, 15_000);

  it("through upstashNode the same client sends one request per attempt", async () => {
    const redis = [new Redis({ url: dropper.url, token: "t", enableTelemetry: false }), ...clients().slice(0, 2)];
    // The two good nodes may decide the vote before the drop is seen: node 0's outcome is then
    // "pending" in the report, and the hook hears the error when it comes.
    const nodeErrors: string[] = [];
    const redlock = new Redlock({
      nodes: upstashNodes(redis),
      // Another node list over the shared nodes: a lock namespace of its own (see docs/deployments.md).
      keyPrefix: `${uniqueKey("dropper")}:`,
      onNodeError: ({ operation, outcome }) => nodeErrors.push(`${operation} ${outcome.node} ${outcome.outcome}`),
    });
    const before = dropper.connections();
    const started = performance.now();
    const lock = await redlock.acquire(uniqueKey("retry"), 5000);
    const elapsed = performance.now() - started;
    const dropped = lock.acquireReport.nodes[0];
    expect(["error", "pending"]).toContain(dropped?.outcome);
    // Wait longer than the client's first backoff steps (50, 136, 369 ms) for any retry to show.
    await new Promise((r) => setTimeout(r, 700));
    expect(nodeErrors).toContain(`acquire ${dropped?.node} error`);
    // The SET and the cluster check sent alongside the first acquisition: each once, never retried.
    expect(dropper.connections() - before).toBe(2);
    expect(elapsed).toBeLessThan(1000);
    await lock.release();
    await redlock.settled();
  });
});
