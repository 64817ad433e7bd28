import { describe, expect, it } from "vitest";
import { ConfigurationError, NodeError } from "../../src/base/errors.js";
import { parseReply, restNode } from "../../src/transport/rest.js";

const id = "http://node";

describe("parseReply: strict parsing of REST answers", () => {
  it("returns the result of a 200 {result}", () => {
    expect(parseReply(id, 200, '{"result":"OK"}')).toBe("OK");
    expect(parseReply(id, 200, '{"result":null}')).toBeNull();
    expect(parseReply(id, 200, '{"result":[1,"a",[null]]}')).toEqual([1, "a", [null]]);
  });

  it.each([
    ["an HTML error page", 502, "<html><body>Bad gateway</body></html>"],
    ["truncated JSON", 200, '{"result":"O'],
    ["an empty body", 200, ""],
    ["a JSON array", 200, '["OK"]'],
    ["a JSON string", 200, '"OK"'],
    ["no result field", 200, '{"value":"OK"}'],
    ["an object result", 200, '{"result":{"ok":true}}'],
    ["a boolean result", 200, '{"result":true}'],
    ["a 500 with a result", 500, '{"result":"OK"}'],
  ])("rejects %s with a NodeError", (_, status, body) => {
    expect(() => parseReply(id, status, body)).toThrow(NodeError);
  });

  it("turns {error} into a NodeError carrying the Redis error", () => {
    const error = (() => {
      try {
        parseReply(id, 400, '{"error":"NOSCRIPT No matching script. Please use EVAL."}');
      } catch (e) {
        return e;
      }
    })() as NodeError;
    expect(error).toBeInstanceOf(NodeError);
    expect(error.redisError).toMatch(/^NOSCRIPT/);
    expect(error.status).toBe(400);
  });

  it.each([401, 403])("turns HTTP %i into a ConfigurationError that carries the status", (status) => {
    const error = (() => {
      try {
        parseReply(id, status, '{"error":"WRONGPASS invalid or missing auth token"}');
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as ConfigurationError).status).toBe(status);
  });
});

describe("restNode", () => {
  it("POSTs the command as a JSON array with the Bearer token", async () => {
    const seen: { url: string; init: RequestInit }[] = [];
    const node = restNode({
      url: "https://example.test/",
      token: "t0k",
      fetch: async (url, init) => {
        seen.push({ url: String(url), init: init as RequestInit });
        return new Response('{"result":"OK"}');
      },
    });
    expect(node.id).toBe("https://example.test");
    await expect(node.command(["SET", "k", "v", "NX", "PX", 100], new AbortController().signal)).resolves.toBe("OK");
    expect(seen).toHaveLength(1);
    const [{ init }] = seen as unknown as [{ init: RequestInit }];
    expect(init.method).toBe("POST");
    expect(init.body).toBe('["SET","k","v","NX","PX",100]');
    expect((init.headers as Record<string, string>).authorization).toBe("Bearer t0k");
  });

  it("wraps a network failure in a NodeError and sends exactly one request", async () => {
    let calls = 0;
    const node = restNode({
      url: "http://127.0.0.1:1",
      token: "x",
      fetch: async () => {
        calls++;
        throw new TypeError("fetch failed");
      },
    });
    await expect(node.command(["GET", "k"], new AbortController().signal)).rejects.toBeInstanceOf(NodeError);
    expect(calls).toBe(1);
  });

  it("rethrows the abort reason when its signal aborts", async () => {
    const controller = new AbortController();
    const node = restNode({
      url: "http://127.0.0.1:1",
      token: "x",
      fetch: (_, init) =>
        new Promise((_, reject) => init?.signal?.addEventListener("abort", () => reject(new Error("aborted")))),
    });
    const reason = new Error("deadline");
    const pending = node.command(["GET", "k"], controller.signal);
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });

  it.each([
    ["not a URL", "nope"],
    ["a non-http scheme", "redis://127.0.0.1:6379"],
    ["embedded credentials", "https://user:pw@example.test"],
  ])("refuses %s", (_, url) => {
    expect(() => restNode({ url, token: "t" })).toThrow(ConfigurationError);
  });

  it("refuses an empty token", () => {
    expect(() => restNode({ url: "https://example.test", token: "" })).toThrow(ConfigurationError);
  });
});

describe("answers that say what is wrong (issue 30)", () => {
  it.each([
    ["a 404 (a wrong URL path)", 404, '{"error":"Not Found"}'],
    ["a 405", 405, ""],
    ["a web page with a 200", 200, "<!doctype html><html><body>Welcome</body></html>"],
  ])("%s is a ConfigurationError at once: the URL is not a Redis REST endpoint", (_, status, body) => {
    expect(() => parseReply(id, status, body)).toThrow(ConfigurationError);
    expect(() => parseReply(id, status, body)).toThrow(/not a Redis REST endpoint/);
  });

  it("a 429 is a rate-limited NodeError with the Retry-After it gave", async () => {
    const node = restNode({
      url: "http://node",
      token: "t",
      fetch: async () => new Response("", { status: 429, headers: { "retry-after": "2" } }),
    });
    const error = await node.command(["PING"], new AbortController().signal).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodeError);
    expect((error as NodeError).status).toBe(429);
    expect((error as NodeError).rateLimited).toBe(true);
    expect((error as NodeError).retryAfterMs).toBe(2000);
  });

  it("a provider's quota error is rate-limited too; other Redis errors are not", () => {
    const quota = new NodeError(id, "x", { status: 400, redisError: "ERR max daily request limit exceeded" });
    expect(quota.rateLimited).toBe(true);
    const other = new NodeError(id, "x", { status: 400, redisError: "ERR wrong number of arguments" });
    expect(other.rateLimited).toBe(false);
  });
});
