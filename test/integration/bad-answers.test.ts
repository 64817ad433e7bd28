/**
 * Nodes that answer garbage over real HTTP (HTML error pages, truncated JSON, wrong types, dropped
 * connections) are node errors, never grants, next to real nodes.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { QuorumUnavailableError, Redlock } from "../../src/index.js";
import { type Stub, startStub } from "./support/http-stub.js";
import { raw, uniqueKey } from "./support/nodes.js";

const nodes = inject("nodes");
const stubs: Stub[] = [];

beforeAll(async () => {
  stubs.push(
    await startStub((_, res) => {
      res.writeHead(502, { "content-type": "text/html" }).end("<html><body><h1>502 Bad Gateway</h1></body></html>");
    }),
    await startStub((_, res) => {
      res.writeHead(200, { "content-type": "application/json" }).end('{"result":"O');
    }),
    await startStub((_, res) => {
      res.writeHead(200, { "content-type": "application/json" }).end('{"result":{"ok":true}}');
    }),
    await startStub((req) => req.socket.destroy()),
  );
});
afterAll(async () => {
  await Promise.all(stubs.map((s) => s.close()));
});

const bad = () => stubs.map((s) => ({ url: s.url, token: "t" }));

describe("unparsable node answers", () => {
  it("3 garbage nodes of 5 → QuorumUnavailableError, nothing of ours left on the real nodes", async () => {
    const key = uniqueKey("garbage");
    // Another node list over the shared nodes: a lock namespace of its own (see docs/deployments.md).
    const keyPrefix = `${uniqueKey("garbage-list")}:`;
    const redlock = new Redlock({
      nodes: [...bad().slice(0, 3), ...nodes.slice(0, 2)],
      keyPrefix,
      maxAttempts: 2,
      retryBaseDelayMs: 10,
    });
    const error = await redlock.acquire(key, 5000).catch((e) => e);
    expect(error).toBeInstanceOf(QuorumUnavailableError);
    const messages = error.attempts[0].nodes.slice(0, 3).map((n: { error?: Error }) => n.error?.message);
    // The body is described, never echoed: a proxy may reflect secrets into it.
    expect(messages[0]).toMatch(/unparsable answer .* \(HTTP 502\): an HTML page of \d+ characters/);
    expect(messages[1]).toMatch(/unparsable answer/);
    expect(messages[2]).toMatch(/no valid result/);
    await redlock.settled();
    for (const node of nodes.slice(0, 2)) expect(await raw(node, "GET", keyPrefix + key)).toBeNull();
  });

  it("2 garbage nodes of 5 (HTML and a dropped connection) → acquired on the 3 real ones", async () => {
    const errors: string[] = [];
    const redlock = new Redlock({
      nodes: [bad()[0]!, bad()[3]!, ...nodes.slice(0, 3)],
      keyPrefix: `${uniqueKey("garbage-list")}:`,
      requestTimeoutMs: 2000,
      onNodeError: ({ operation, outcome }) => {
        if (operation === "acquire") errors.push(`${outcome.node} ${outcome.outcome}`);
      },
    });
    const lock = await redlock.acquire(uniqueKey("garbage2"), 5000);
    // The vote may settle before the garbage answers arrive (they are then "pending").
    expect(lock.acquireReport.nodes.slice(2).map((n) => n.outcome)).toEqual(["acquired", "acquired", "acquired"]);
    await lock.release();
    await redlock.settled();
    expect(errors.sort()).toEqual([`${redlock.nodes[0]!.id} error`, `${redlock.nodes[1]!.id} error`].sort());
  });
});
