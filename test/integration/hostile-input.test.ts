/**
 * Findings of a hostile-input audit, against real HTTP servers on loopback: redirects never count
 * as votes, and no secret (REST token, URL password, lock token) appears in any error message or
 * cause chain, whatever a node or a proxy echoes back.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redlock, RedlockError } from "../../src/index.js";
import { upstashNode } from "../../src/upstash/index.js";

type Handler = (request: IncomingMessage, body: string, response: ServerResponse) => void;

const servers: Server[] = [];

async function serve(handler: Handler): Promise<string> {
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => handler(request, body, response));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

const TOKEN = "rest-token-0123456789abcdef";

/** Every message in an error's cause chain. */
function messages(error: unknown): string[] {
  const out: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 10; depth++) {
    out.push(current instanceof Error ? `${current.name}: ${current.message}` : String(current));
    if (current instanceof RedlockError) {
      for (const attempt of current.attempts)
        for (const node of attempt.nodes) if (node.error) out.push(...messages(node.error));
    }
    current = current instanceof Error ? current.cause : undefined;
  }
  return out;
}

describe("redirects", () => {
  let granting: string;
  const received: string[] = [];

  beforeAll(async () => {
    // Another origin that would happily say OK to anything, and records what reaches it.
    granting = await serve((_request, body, response) => {
      received.push(body);
      response.writeHead(200, { "content-type": "application/json" }).end('{"result":"OK"}');
    });
  });

  it("three nodes answering 307 to another origin do not make a lock, and nothing reaches that origin", async () => {
    const redirecting = await Promise.all(
      [0, 1, 2].map(() =>
        serve((_request, _body, response) => {
          response.writeHead(307, { location: `${granting}/` }).end();
        }),
      ),
    );
    const redlock = new Redlock({ nodes: redirecting.map((url) => ({ url, token: TOKEN })), maxAttempts: 1 });
    const error = await redlock.acquire("r", 5000).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "QUORUM_UNAVAILABLE" });
    expect(received).toEqual([]);
    const nodeError = (error as RedlockError).nodes[0]?.error;
    expect(nodeError?.message).toMatch(/redirect \(HTTP 307\) to http:\/\/127\.0\.0\.1:\d+/);
    await redlock.settled();
    expect(received).toEqual([]);
  });

  it("an http URL redirected to https says so, instead of blaming the token", async () => {
    const url = await serve((request, _body, response) => {
      response.writeHead(308, { location: `https://${request.headers.host}/` }).end();
    });
    const redlock = new Redlock({ nodes: [{ url, token: TOKEN }], maxAttempts: 1 });
    const error = (await redlock.acquire("r", 5000).catch((e: unknown) => e)) as RedlockError;
    expect(error.nodes[0]?.error?.message).toMatch(/redirect \(HTTP 308\).*use https:\/\/127\.0\.0\.1:\d+ \(https\)/);
  });
});

describe("no secret in any error", () => {
  const LOCK_TOKEN_PATTERN = /[0-9a-f]{40}/;

  it("scans every error the bad-input cases produce", async () => {
    const echoAll: Handler = (request, body, response) => {
      // A hostile proxy: echoes the Authorization header and the request body back.
      response
        .writeHead(500, { "content-type": "text/plain" })
        .end(`upstream failed; auth=${request.headers.authorization}; body=${body}`);
    };
    const echo401: Handler = (request, _body, response) => {
      response.writeHead(401).end(`denied ${request.headers.authorization}`);
    };
    const echoJsonError: Handler = (request, body, response) => {
      response
        .writeHead(400, { "content-type": "application/json" })
        .end(JSON.stringify({ error: `ERR bad request ${request.headers.authorization} ${body}` }));
    };
    const echoUrls = await Promise.all([serve(echoAll), serve(echo401), serve(echoJsonError)]);

    const errors: unknown[] = [];
    /** Collect the thrown error, or the node errors of a result (release never throws). */
    const capture = async (work: () => unknown) => {
      try {
        const result = (await work()) as { nodes?: { error?: Error }[] } | undefined;
        for (const node of result?.nodes ?? []) if (node.error) errors.push(node.error);
      } catch (error) {
        errors.push(error);
      }
    };
    // Configuration mistakes with secrets in them.
    await capture(() => new Redlock({ nodes: [{ url: "https://default:SECRETPASSWORD@host:99999", token: TOKEN }] }));
    await capture(
      () => new Redlock({ nodes: [{ url: "rediss://default:SECRETPASSWORD@eu1.example.io:6379", token: TOKEN }] }),
    );
    await capture(() => new Redlock({ nodes: [{ url: "https://default:SECRETPASSWORD@example.io", token: TOKEN }] }));
    // Nodes that echo what they were sent, through the fetch transport…
    for (const url of echoUrls) {
      const redlock = new Redlock({ nodes: [{ url, token: TOKEN }], maxAttempts: 1 });
      await capture(() => redlock.acquire("r", 5000));
      await capture(() => redlock.release("r", "f".repeat(40)));
      await capture(() => redlock.extend("r", "e".repeat(40), 5000));
    }
    // …and through the @upstash/redis adapter.
    for (const url of echoUrls) {
      const node = upstashNode(new Redis({ url, token: TOKEN, retry: false }));
      const redlock = new Redlock({ nodes: [node], maxAttempts: 1 });
      await capture(() => redlock.acquire("r", 5000));
      await capture(() => redlock.release("r", "f".repeat(40)));
    }
    expect(errors.length).toBe(3 + 3 * 3 + 3 * 2);
    for (const error of errors) {
      for (const text of messages(error)) {
        expect(text).not.toContain(TOKEN);
        expect(text).not.toContain("SECRETPASSWORD");
        expect(text).not.toMatch(LOCK_TOKEN_PATTERN);
        expect(text).not.toContain("f".repeat(40));
      }
    }
    // The pasted Redis URL gets advice, not "must be http(s): null".
    expect((errors[1] as Error).message).toMatch(/REST URL/);
  });
});
