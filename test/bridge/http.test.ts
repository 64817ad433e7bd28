/**
 * The REST bridge at the HTTP level, with raw `fetch`: authentication, input validation, error
 * mapping, base64 encoding, argument conversion, body limit, routing and the delay hook.
 * Effects on Redis are checked with a direct ioredis connection, bypassing the bridge.
 */
import { type AddressInfo, createServer } from "node:net";
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type NodeCluster, type NodeInfo, startNodes } from "../../tools/nodes/index.js";
import { createBridgeApp } from "../../tools/rest-bridge/app.js";
import { type Bridge, startBridge } from "../../tools/rest-bridge/index.js";
import type { CommandRunner } from "../../tools/rest-bridge/redis-backend.js";
import { redisCliError } from "./redis-cli.js";

let cluster: NodeCluster;
let node: NodeInfo;
let redis: IORedis;

beforeAll(async () => {
  cluster = await startNodes({ count: 1 });
  node = cluster.nodes[0] as NodeInfo;
  redis = new IORedis({ port: node.redisPort, protocol: 2, lazyConnect: true });
  await redis.connect();
});

afterAll(async () => {
  redis?.disconnect();
  await cluster?.stop();
});

beforeEach(async () => {
  await redis.flushall();
});

interface Reply {
  status: number;
  contentType: string | null;
  body: unknown;
  headers: Headers;
}

/** POSTs a body (a string is sent verbatim, anything else as JSON) to the node's bridge. */
async function post(
  path: string,
  body: unknown,
  { token = node.token as string | null, headers = {} as Record<string, string>, method = "POST", url = node.url } = {},
): Promise<Reply> {
  const res = await fetch(url + path, {
    method,
    headers: {
      "content-type": "application/json",
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return {
    status: res.status,
    contentType: res.headers.get("content-type"),
    body: JSON.parse(text) as unknown,
    headers: res.headers,
  };
}

/** The bridge still serves a normal request. */
async function expectHealthy(url = node.url, token = node.token): Promise<void> {
  const reply = await post("/", ["PING"], { url, token });
  expect(reply).toMatchObject({ status: 200, body: { result: "PONG" } });
}

describe("authentication", () => {
  const cases: [string, string | null][] = [
    ["a wrong token", "not-the-token"],
    ["a missing token", null],
    ["an empty token", ""],
  ];

  for (const [label, token] of cases) {
    for (const [path, body] of [
      ["/", ["SET", "auth:key", "x"]],
      ["/pipeline", [["SET", "auth:key", "x"]]],
      ["/multi-exec", [["SET", "auth:key", "x"]]],
    ] as const) {
      it(`${label} on ${path} → 401 JSON, and nothing reaches Redis`, async () => {
        const reply = await post(path, body, { token });
        expect(reply.status).toBe(401);
        expect(reply.contentType).toMatch(/^application\/json/);
        expect(reply.body).toEqual({
          error: "WRONGPASS invalid or missing auth token",
        });
        expect(await redis.exists("auth:key")).toBe(0);
      });
    }
  }

  it("a non-Bearer scheme is refused", async () => {
    const res = await fetch(node.url, {
      method: "POST",
      headers: { authorization: `Basic ${node.token}` },
      body: JSON.stringify(["SET", "auth:key", "x"]),
    });
    expect(res.status).toBe(401);
    expect(await redis.exists("auth:key")).toBe(0);
  });

  it("the right token works (control)", async () => {
    expect((await post("/", ["SET", "auth:key", "x"])).body).toEqual({
      result: "OK",
    });
    expect(await redis.get("auth:key")).toBe("x");
  });
});

describe("malformed input → 400 JSON error, and the bridge keeps serving", () => {
  const cases: [string, string, string][] = [
    ["/", "invalid JSON", '["SET","k"'],
    ["/", "an empty body", ""],
    ["/", "a JSON object", '{"cmd":"GET"}'],
    ["/", "a JSON string", '"GET"'],
    ["/", "an empty command", "[]"],
    ["/", "a numeric command name", "[1]"],
    ["/", "a null command name", "[null]"],
    ["/", "an object argument", '["SET","k",{"a":1}]'],
    ["/", "a nested array argument", '["SET","k",["v"]]'],
    ["/", "a null argument", '["SET","k",null]'],
    ["/pipeline", "invalid JSON", "[["],
    ["/pipeline", "a JSON object", '{"a":1}'],
    ["/pipeline", "an empty pipeline", "[]"],
    ["/pipeline", "an element that is not an array", '[["PING"],"GET"]'],
    ["/pipeline", "a flat command instead of a list", '["GET","k"]'],
    ["/pipeline", "an empty command", "[[]]"],
    ["/pipeline", "a bad argument", '[["SET","k",{"a":1}]]'],
    ["/multi-exec", "invalid JSON", "{"],
    ["/multi-exec", "an empty transaction", "[]"],
    ["/multi-exec", "an element that is not an array", '["SET"]'],
    ["/multi-exec", "a numeric command name", "[[42]]"],
  ];

  for (const [path, label, body] of cases) {
    it(`${path} with ${label}`, async () => {
      const reply = await post(path, body);
      expect(reply.status).toBe(400);
      expect(reply.contentType).toMatch(/^application\/json/);
      expect(reply.body).toEqual({ error: expect.stringMatching(/^ERR .+/) });
      await expectHealthy();
    });
  }

  it("a malformed pipeline runs none of its commands", async () => {
    const reply = await post("/pipeline", '[["SET","mal:k","x"],["SET","mal:k2",{"a":1}]]');
    expect(reply.status).toBe(400);
    expect(await redis.exists("mal:k")).toBe(0);
  });
});

describe("Redis errors", () => {
  it("WRONGTYPE → 400 with Redis's message", async () => {
    await redis.set("err:str", "x");
    const reply = await post("/", ["LPUSH", "err:str", "y"]);
    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: await redisCliError(node.redisPort, "lpush", "err:str", "y"),
    });
    expect(reply.body).toEqual({
      error: "WRONGTYPE Operation against a key holding the wrong kind of value",
    });
  });

  it("wrong arity → 400 with Redis's message", async () => {
    const reply = await post("/", ["GET"]);
    expect(reply).toMatchObject({
      status: 400,
      body: { error: "ERR wrong number of arguments for 'get' command" },
    });
  });

  it("unknown command → 400", async () => {
    const reply = await post("/", ["NOSUCHCOMMAND", "x"]);
    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: expect.stringMatching(/^ERR unknown command 'NOSUCHCOMMAND'/i),
    });
  });

  it("commands that would hijack the shared connection are refused without reaching Redis", async () => {
    for (const command of [
      ["MULTI"],
      ["SUBSCRIBE", "ch"],
      ["SELECT", "1"],
      ["BLPOP", "q", "0"],
      ["CLIENT", "REPLY", "OFF"],
    ]) {
      const reply = await post("/", command);
      expect(reply.status).toBe(400);
      expect(reply.body).toEqual({
        error: `ERR Command is not available: '${command[0]?.toLowerCase()}'`,
      });
    }
    await expectHealthy();
  });

  it("pipeline: errors are per command with HTTP 200, commands run in order", async () => {
    await redis.set("pl:str", "x");
    const reply = await post("/pipeline", [
      ["SET", "pl:a", "1"],
      ["INCR", "pl:str"],
      ["INCR", "pl:a"],
      ["BLPOP", "q", 0],
      ["GET", "pl:a"],
    ]);
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual([
      { result: "OK" },
      { error: "ERR value is not an integer or out of range" },
      { result: 2 },
      { error: "ERR Command is not available: 'blpop'" },
      { result: "2" },
    ]);
  });

  it("multi-exec: a runtime error stays per command (200)", async () => {
    await redis.set("tx:str", "x");
    const reply = await post("/multi-exec", [
      ["SET", "tx:a", "1"],
      ["INCR", "tx:str"],
      ["GET", "tx:a"],
    ]);
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual([
      { result: "OK" },
      { error: "ERR value is not an integer or out of range" },
      { result: "1" },
    ]);
  });

  it("multi-exec: a queue-time error discards everything → 400 EXECABORT", async () => {
    const reply = await post("/multi-exec", [["SET", "tx:b", "1"], ["GET"], ["SET", "tx:c", "1"]]);
    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: expect.stringMatching(/^EXECABORT Transaction discarded because of previous errors\./),
    });
    expect((reply.body as { error: string }).error).toContain("ERR wrong number of arguments for 'get' command");
    expect(await redis.exists("tx:b", "tx:c")).toBe(0);
  });

  it("multi-exec: concurrent transactions never interleave (SRH #25)", async () => {
    const replies = await Promise.all(
      Array.from({ length: 50 }, () =>
        post("/multi-exec", [
          ["INCR", "tx:counter"],
          ["INCR", "tx:counter"],
        ]),
      ),
    );
    const pairs = replies.map((reply) => (reply.body as { result: number }[]).map((item) => item.result));
    for (const [first, second] of pairs) expect(second).toBe((first as number) + 1);
    expect(pairs.map(([first]) => first).sort((a, b) => (a as number) - (b as number))).toEqual(
      Array.from({ length: 50 }, (_, i) => 2 * i + 1),
    );
  });
});

describe("Upstash-Encoding: base64", () => {
  const b64 = (text: string) => Buffer.from(text).toString("base64");
  const encoding = { headers: { "upstash-encoding": "base64" } };

  it("encodes every string, OK included, recursively in nested arrays; never integers or null", async () => {
    // GET of a missing key is Lua `false` inside the script, which Redis turns into a nil element.
    const script =
      "return {redis.call('set', KEYS[1], 'x'), 1, 'a', {2, 'OK', redis.call('get', 'none')}, redis.call('get', KEYS[1])}";
    const reply = await post("/", ["EVAL", script, 1, "b64:k"], encoding);
    expect(reply).toMatchObject({
      status: 200,
      body: {
        result: [b64("OK"), 1, b64("a"), [2, b64("OK"), null], b64("x")],
      },
    });
  });

  it("encodes a top-level status reply and bulk string; leaves integers and null", async () => {
    expect((await post("/", ["SET", "b64:s", "hello"], encoding)).body).toEqual({ result: b64("OK") });
    expect((await post("/", ["GET", "b64:s"], encoding)).body).toEqual({
      result: "aGVsbG8=",
    });
    expect((await post("/", ["STRLEN", "b64:s"], encoding)).body).toEqual({
      result: 5,
    });
    expect((await post("/", ["GET", "b64:none"], encoding)).body).toEqual({
      result: null,
    });
  });

  it("never encodes errors (single, pipeline, multi-exec)", async () => {
    const single = await post("/", ["EVALSHA", "f".repeat(40), 0], encoding);
    expect(single).toMatchObject({
      status: 400,
      body: { error: "NOSCRIPT No matching script. Please use EVAL." },
    });
    const pipeline = await post("/pipeline", [["PING"], ["GET"]], encoding);
    expect(pipeline.body).toEqual([
      { result: b64("PONG") },
      { error: "ERR wrong number of arguments for 'get' command" },
    ]);
    await redis.set("b64:str", "x");
    const tx = await post("/multi-exec", [["INCR", "b64:str"]], encoding);
    expect(tx.body).toEqual([{ error: "ERR value is not an integer or out of range" }]);
  });

  it("is binary-safe: bytes that are not UTF-8 survive base64", async () => {
    const bytes = Buffer.from([0xff, 0x00, 0xfe, 0x41, 0x80]);
    await redis.set("b64:bin", bytes);
    expect((await post("/", ["GET", "b64:bin"], encoding)).body).toEqual({
      result: bytes.toString("base64"),
    });
    // Without the header the bytes are decoded as UTF-8 (invalid sequences become U+FFFD), as on Upstash.
    expect((await post("/", ["GET", "b64:bin"])).body).toEqual({
      result: bytes.toString("utf8"),
    });
  });

  it("applies per element in a pipeline", async () => {
    const reply = await post(
      "/pipeline",
      [
        ["SET", "b64:p", "v"],
        ["GET", "b64:p"],
        ["DEL", "b64:p"],
      ],
      encoding,
    );
    expect(reply.body).toEqual([{ result: b64("OK") }, { result: b64("v") }, { result: 1 }]);
  });
});

describe("argument conversion", () => {
  it("numbers become decimal strings", async () => {
    expect((await post("/", ["SET", "arg:n", 12.5])).body).toEqual({
      result: "OK",
    });
    expect(await redis.get("arg:n")).toBe("12.5");
    await post("/", ["SET", "arg:i", -3]);
    expect(await redis.get("arg:i")).toBe("-3");
    expect((await post("/", ["INCRBY", "arg:i", 10])).body).toEqual({
      result: 7,
    });
    expect((await post("/", ["SET", "arg:px", "v", "PX", 60000])).body).toEqual({ result: "OK" });
    expect(await redis.pttl("arg:px")).toBeGreaterThan(59_000);
  });

  it("booleans become true/false", async () => {
    await post("/", ["SET", "arg:t", true]);
    await post("/", ["SET", "arg:f", false]);
    expect(await redis.mget("arg:t", "arg:f")).toEqual(["true", "false"]);
  });

  it("strings pass through unchanged, including empty and non-ASCII ones", async () => {
    await post("/", ["SET", "arg:s", ""]);
    await post("/", ["SET", "arg:u", "ü € 😀"]);
    expect(await redis.mget("arg:s", "arg:u")).toEqual(["", "ü € 😀"]);
  });

  it("command names are case-insensitive", async () => {
    expect((await post("/", ["pInG"])).body).toEqual({ result: "PONG" });
  });
});

describe("ready()", () => {
  it("a bridge answers 503 until its Redis connection is up; ready() waits for it, or rejects in time", async () => {
    // A loopback port nobody listens on: the bridge can never connect.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const closedPort = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));

    const orphan = await startBridge({ redisPort: closedPort, token: "orphan-token" });
    try {
      const reply = await post("/", ["PING"], { url: orphan.url, token: "orphan-token" });
      expect(reply.status).toBe(503);
      await expect(orphan.ready(300)).rejects.toThrow(/not ready within 300 ms/);
    } finally {
      await orphan.close();
    }

    const bridge = await startBridge({ redisPort: node.redisPort, token: "ready-token" });
    try {
      await bridge.ready();
      expect((await post("/", ["PING"], { url: bridge.url, token: "ready-token" })).body).toEqual({ result: "PONG" });
      // Once connected, it resolves at once: no "ready" event will come again to wait for.
      await expect(bridge.ready(1)).resolves.toBeUndefined();
    } finally {
      await bridge.close();
    }
  });
});

describe("body size limit", () => {
  let small: Bridge;

  beforeAll(async () => {
    small = await startBridge({
      redisPort: node.redisPort,
      token: "small-limit-token",
      maxBodyBytes: 1024,
    });
    await small.ready();
  });

  afterAll(async () => {
    await small?.close();
  });

  it("a body over the default 1 MiB → 400 JSON, and the bridge keeps serving", async () => {
    const reply = await post("/", ["SET", "big:k", "x".repeat(1024 * 1024 + 10)]);
    expect(reply).toMatchObject({
      status: 400,
      body: { error: expect.stringMatching(/^ERR max request size exceeded/) },
    });
    expect(await redis.exists("big:k")).toBe(0);
    await expectHealthy();
  });

  it("a body just under the limit is accepted", async () => {
    const value = "y".repeat(1000);
    const body = JSON.stringify(["SET", "big:ok", value]);
    expect(body.length).toBeLessThanOrEqual(1024);
    const reply = await post("/", body, {
      url: small.url,
      token: "small-limit-token",
    });
    expect(reply.body).toEqual({ result: "OK" });
  });

  it("a streamed (chunked, no content-length) body over the limit → 400 JSON", async () => {
    const chunk = new TextEncoder().encode(`["SET","big:s","${"z".repeat(2000)}"]`);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(chunk);
        controller.close();
      },
    });
    const res = await fetch(small.url, {
      method: "POST",
      headers: { authorization: "Bearer small-limit-token" },
      body: stream,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: expect.stringMatching(/^ERR max request size exceeded/),
    });
    expect(await redis.exists("big:s")).toBe(0);
    await expectHealthy(small.url, "small-limit-token");
  });
});

describe("routing", () => {
  it("an unknown path → 404 JSON", async () => {
    const reply = await post("/set/foo/bar", ["PING"]);
    expect(reply).toMatchObject({
      status: 404,
      body: { error: expect.stringMatching(/^ERR not found/) },
    });
  });

  it("a bad method → 405 JSON with Allow", async () => {
    for (const [method, path] of [
      ["GET", "/"],
      ["DELETE", "/pipeline"],
      ["PATCH", "/multi-exec"],
    ]) {
      const res = await fetch(node.url + path, {
        method,
        headers: { authorization: `Bearer ${node.token}` },
      });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("POST, PUT");
      expect(await res.json()).toEqual({
        error: expect.stringMatching(/^ERR method/),
      });
    }
  });

  it("PUT works like POST (Upstash accepts both)", async () => {
    expect((await post("/", ["PING"], { method: "PUT" })).body).toEqual({
      result: "PONG",
    });
  });

  it("an unexpected exception → 500 with a JSON body", async () => {
    const failing = () => Promise.reject(new Error("boom"));
    const runner: CommandRunner = {
      single: failing,
      pipeline: failing,
      transaction: failing,
    };
    const app = createBridgeApp({
      token: "t",
      runner,
      maxBodyBytes: 1024,
      delay: () => ({ ms: 0, phase: "response" }),
    });
    const res = await app.request("/", {
      method: "POST",
      headers: { authorization: "Bearer t" },
      body: '["PING"]',
    });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({
      error: "ERR internal bridge error: boom",
    });
  });
});

describe("setDelay", () => {
  afterAll(() => cluster.setDelay(0, 0));

  const timed = async (fn: () => Promise<unknown>) => {
    const start = performance.now();
    await fn();
    return performance.now() - start;
  };

  it("delays every response, and 0 turns it off", async () => {
    cluster.setDelay(0, 300);
    expect(await timed(() => post("/", ["PING"]))).toBeGreaterThanOrEqual(290);
    expect(await timed(() => post("/nope", []))).toBeGreaterThanOrEqual(290);
    cluster.setDelay(0, 0);
    expect(await timed(() => post("/", ["PING"]))).toBeLessThan(250);
  });

  it("by default the command is applied before the delayed response", async () => {
    cluster.setDelay(0, 600);
    const pending = post("/", ["SET", "delay:r", "x"]);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(await redis.get("delay:r")).toBe("x");
    expect((await pending).body).toEqual({ result: "OK" });
    cluster.setDelay(0, 0);
  });

  it("with phase 'request' the command itself starts late", async () => {
    cluster.setDelay(0, 600, "request");
    const pending = post("/", ["SET", "delay:q", "x"]);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(await redis.get("delay:q")).toBeNull();
    expect((await pending).body).toEqual({ result: "OK" });
    expect(await redis.get("delay:q")).toBe("x");
    cluster.setDelay(0, 0);
  });
});

describe("setJitter, requestCounts and commandCounts", () => {
  afterAll(() => cluster.setJitter(0, 0));

  it("holds each request back by a random delay below the bound, before the command runs", async () => {
    cluster.setJitter(0, 400);
    const waits: number[] = [];
    for (let i = 0; i < 6; i++) {
      const start = performance.now();
      await post("/", ["PING"]);
      waits.push(performance.now() - start);
    }
    // Random in [0, 400): six of them sum to about 1200 ms (below 300 ms with odds of 1 in 4000),
    // are not all alike, and none is far beyond the bound (loose: a busy machine).
    expect(waits.reduce((a, b) => a + b, 0)).toBeGreaterThan(300);
    expect(Math.max(...waits) - Math.min(...waits)).toBeGreaterThan(5);
    expect(Math.max(...waits)).toBeLessThan(400 + 1_000);
    cluster.setJitter(0, 0);
  });

  it("counts every HTTP request the bridge receives, whatever its outcome", async () => {
    const before = cluster.requestCounts()[0] as number;
    const pingsBefore = cluster.commandCounts()[0]?.ping ?? 0;
    await post("/", ["PING"]);
    await post("/pipeline", [["PING"], ["ping"]]);
    await post("/nope", []);
    expect((cluster.requestCounts()[0] as number) - before).toBe(3);
    // Commands are counted by name, case-insensitively: 1 + 2 PINGs.
    expect((cluster.commandCounts()[0]?.ping ?? 0) - pingsBefore).toBe(3);
  });
});
