/**
 * No reply is quoted (issue 27, K): a node or proxy that reflects the request into a well-formed
 * `200 {"result": …}` answer never gets the REST token or a lock token into an error message, a
 * `cause`, a hook's payload, a result, or the JSON of any of them, on any path: acquire, extend,
 * release, inspect, by-token extend and release, and polls of the gate under contention.
 *
 * The nodes are real, behind proxies on loopback that forward each request, or answer it with a
 * reflection of it, as the test chooses. Every token and waiter id the proxies see is a secret.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AttemptReport, type NodeOutcome, Redlock } from "../../src/index.js";
import type { Stub } from "./support/http-stub.js";
import { uniqueKey } from "./support/nodes.js";
import { useOwnCluster } from "./support/own-cluster.js";
import { startProxy } from "./support/proxy.js";

const nodesOf = useOwnCluster();
/** One name for the nodes reached directly and through the proxies (see docs/deployments.md). */
const CLUSTER = "one-token-redaction";

/** How a proxy answers a request itself: with the command it received, or with the request as text. */
type Reflection = "command" | "request";

/** Which requests the proxies answer themselves, and how (the others go to the node). */
let reflect: (args: readonly unknown[]) => Reflection | undefined = () => undefined;
/** Lock tokens and waiter ids seen in requests. */
const seenSecrets = new Set<string>();
const proxies: Stub[] = [];

/** The string arguments of a command that may be a token: never its name, a script or SHA, or a key. */
function tokensOf(args: readonly unknown[]): string[] {
  const command = String(args[0]).toUpperCase();
  const values = command === "SET" ? args.slice(2) : command.startsWith("EVAL") ? args.slice(3 + Number(args[2])) : [];
  return values.filter((v): v is string => typeof v === "string" && v.length >= 16);
}

beforeAll(async () => {
  for (const node of nodesOf().nodes) {
    proxies.push(
      await startProxy(({ authorization, body }) => {
        const args = JSON.parse(body) as unknown[];
        for (const token of tokensOf(args)) seenSecrets.add(token);
        const how = reflect(args);
        if (how === undefined) return { forward: node.url };
        const result = how === "command" ? args : `POST / HTTP/1.1\r\nauthorization: ${authorization}\r\n\r\n${body}`;
        return { answer: { status: 200, body: JSON.stringify({ result }) } };
      }),
    );
  }
});
afterAll(async () => {
  await Promise.all(proxies.map((p) => p.close()));
});

/** Every string reachable from `value` (own properties, non-enumerable ones too), and the JSON of each error. */
function textsOf(value: unknown, out: string[] = [], visited = new Set<unknown>()): string[] {
  if (typeof value === "string") out.push(value);
  if (value === null || typeof value !== "object" || visited.has(value)) return out;
  visited.add(value);
  if (value instanceof Error) {
    out.push(String(value));
    try {
      out.push(JSON.stringify(value));
    } catch {
      // Not serialisable: its strings are still collected below.
    }
  }
  for (const name of Object.getOwnPropertyNames(value)) textsOf((value as Record<string, unknown>)[name], out, visited);
  return out;
}

const FRAGMENT = 12;

/** The first text that carries `FRAGMENT` characters in a row of a secret, cut where the secret starts. */
function leak(texts: readonly string[], secrets: readonly string[]): string | undefined {
  for (const secret of secrets) {
    for (let i = 0; i + FRAGMENT <= secret.length; i++) {
      const fragment = secret.slice(i, i + FRAGMENT);
      const text = texts.find((t) => t.includes(fragment));
      if (text !== undefined) return `${text.slice(0, text.indexOf(fragment)).slice(-200)}<a secret>…`;
    }
  }
  return undefined;
}

/** A client through the proxies, recording every hook payload; and a check of everything it said. */
function client(label: string) {
  const events: unknown[] = [];
  const redlock = new Redlock({
    nodes: nodesOf().nodes.map((n, i) => ({ url: (proxies[i] as Stub).url, token: n.token })),
    // The nodes through the proxies are the shared nodes under other URLs: the same cluster.
    clusterName: CLUSTER,
    onNodeError: (event) => events.push(event),
    onAttempt: (report) => events.push(report),
    onLockLost: (event) => events.push(event),
    onReleaseError: (event) => events.push(event),
  });
  const restTokens = nodesOf().nodes.map((n) => n.token);
  return {
    redlock,
    key: uniqueKey(label),
    events,
    /** What `outcomes` (errors, results) and the hooks carried must hold no secret. */
    expectNoSecret(...outcomes: unknown[]) {
      const texts = textsOf([outcomes, events]);
      expect(leak(texts, [...restTokens, ...seenSecrets]), "a secret in what the client reported").toBeUndefined();
    },
  };
}

/** The node errors reported by results and hooks: the reflections did reach the client. */
function nodeErrors(...sources: unknown[]): number {
  return collectOutcomes(sources).filter((o) => o.outcome === "error").length;
}

function collectOutcomes(value: unknown, out: NodeOutcome[] = [], visited = new Set<unknown>()): NodeOutcome[] {
  if (value === null || typeof value !== "object" || visited.has(value)) return out;
  visited.add(value);
  const record = value as Partial<NodeOutcome> & Partial<AttemptReport>;
  if (typeof record.node === "string" && typeof record.outcome === "string") out.push(record as NodeOutcome);
  for (const name of Object.getOwnPropertyNames(value))
    collectOutcomes((value as Record<string, unknown>)[name], out, visited);
  return out;
}

const settle = <T>(promise: Promise<T>): Promise<T | unknown> =>
  promise.then(
    (value) => value,
    (error: unknown) => error,
  );

const isScript = (args: readonly unknown[]) => String(args[0]).toUpperCase().startsWith("EVAL");

describe("the checker", () => {
  it("catches a fragment of a secret anywhere in an error's cause chain or attempts", () => {
    const secret = "0123456789abcdef0123456789abcdef01234567";
    const deep = new Error("outer", { cause: new Error(`inner …${secret.slice(5, 20)}…`) });
    expect(leak(textsOf(deep), [secret])).toBeDefined();
    const inReport = { attempts: [{ nodes: [{ node: "n", outcome: "error", error: new Error(secret.slice(28)) }] }] };
    expect(leak(textsOf(inReport), [secret])).toBeDefined();
    expect(leak(textsOf(new Error("nothing here")), [secret])).toBeUndefined();
  });
});

for (const reflection of ["command", "request"] as const) {
  describe(`K: every node reflects the ${reflection} into 200 {"result": …}`, () => {
    it("acquire and tryAcquire", async () => {
      const c = client("k-acquire");
      reflect = () => reflection;
      try {
        const acquired = await settle(c.redlock.acquire(c.key, 2000, { maxAttempts: 2, retryBaseDelayMs: 10 }));
        const tried = await settle(c.redlock.tryAcquire(c.key, 2000));
        expect(acquired).toBeInstanceOf(Error);
        expect(tried).toBeInstanceOf(Error);
        expect(nodeErrors(acquired, tried)).toBeGreaterThan(0);
        c.expectNoSecret(acquired, tried);
      } finally {
        reflect = () => undefined;
      }
    });

    it("extend, release and inspect of a held lock, and extend and release by token", async () => {
      const c = client("k-held");
      const lock = await c.redlock.acquire(c.key, 3000);
      reflect = () => reflection;
      try {
        const extended = await settle(lock.extend(3000));
        const byTokenExtended = await settle(c.redlock.extend(c.key, lock.token, 3000));
        const byTokenReleased = await settle(c.redlock.release(c.key, lock.token));
        const inspected = await settle(c.redlock.inspect(c.key));
        const released = await settle(lock.release());
        expect(extended).toBeInstanceOf(Error);
        expect(byTokenExtended).toBeInstanceOf(Error);
        expect(nodeErrors(byTokenReleased, inspected, released)).toBeGreaterThanOrEqual(3);
        c.expectNoSecret(extended, byTokenExtended, byTokenReleased, inspected, released);
      } finally {
        reflect = () => undefined;
      }
      await c.redlock.release(c.key, lock.token);
    });

    it("polls of the gate while another client holds the lock", async () => {
      const c = client("k-gate");
      const holder = await new Redlock({
        nodes: nodesOf().nodes.map(({ url, token }) => ({ url, token })),
        clusterName: CLUSTER,
      }).acquire(c.key, 5000);
      // Plain SET NX fan-outs reach the nodes (and find the lock held); every script is reflected.
      reflect = (args) => (isScript(args) ? reflection : undefined);
      try {
        const waited = await settle(c.redlock.acquire(c.key, 5000, { maxAttempts: 3, acquireTimeoutMs: 3000 }));
        expect(waited).toBeInstanceOf(Error);
        expect(nodeErrors(c.events), "a poll of the gate failed on the reflection").toBeGreaterThan(0);
        c.expectNoSecret(waited);
      } finally {
        reflect = () => undefined;
        await holder.release();
      }
    });
  });
}
