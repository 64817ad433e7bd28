/**
 * How refusals are classified and what they cost (issue 30): contention is never reported as an
 * outage because slower nodes had not answered yet, and a node that rejected its token gets no
 * cleanup or release requests afterwards.
 */
import { describe, expect, it } from "vitest";
import { Redlock as PlainRedlock } from "../../src/core/index.js";
import { LockHeldError, NodeError, QuorumUnavailableError, RateLimitedError, Redlock } from "../../src/index.js";
import { fakeClock, fakeNodes } from "./support/fake-node.js";
import { run, useFakeTime } from "./support/fake-time.js";

useFakeTime();

describe("a refusal is classified on what the nodes finally answered", () => {
  it.each([
    ["the default client", Redlock],
    ["the plain preset", PlainRedlock],
  ])(
    "%s: one node down (answering first), the lock held on the four others: tryAcquire() is null",
    async (_, Client) => {
      const nodes = fakeNodes(5);
      for (const n of nodes) n.occupy("r");
      // The down node refuses at once; the others answer "held" later, so the vote is decided at
      // 1 error and 2 held with 2 still pending.
      nodes[0]!.behaviour = { kind: "error", latencyMs: 0 };
      nodes.forEach((n, i) => {
        if (i > 0) n.behaviour = { kind: "ok", latencyMs: i < 3 ? 5 : 30 };
      });
      const redlock = new Client({ nodes, clock: fakeClock, maxAttempts: 3 });
      expect(await run(redlock.tryAcquire("r", 10_000), 1)).toBeNull();
      const error = await run(redlock.acquire("r", 10_000), 1).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockHeldError);
    },
  );

  it("negative control: three nodes down is an outage, not contention", async () => {
    const nodes = fakeNodes(5);
    for (const n of nodes) n.occupy("r");
    for (const n of nodes.slice(0, 3)) n.behaviour = { kind: "error", latencyMs: 0 };
    for (const n of nodes.slice(3)) n.behaviour = { kind: "ok", latencyMs: 30 };
    const redlock = new Redlock({ nodes, clock: fakeClock });
    const error = await run(redlock.tryAcquire("r", 10_000), 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnavailableError);
  });
});

describe("a node that rejected its token", () => {
  it("gets no request after the acquisition: no cleanup, no sweep, no release", async () => {
    const nodes = fakeNodes(5);
    nodes[0]!.behaviour = { kind: "unauthorized" };
    nodes[1]!.behaviour = { kind: "unauthorized" };
    const redlock = new Redlock({ nodes, clock: fakeClock });
    const lock = await run(redlock.acquire("r", 2000), 1);
    const before = [nodes[0]!.log.length, nodes[1]!.log.length];
    await run(lock.release(), 1);
    await run(redlock.settled(), 1);
    // The release goes to every node once (whether it holds the key is its own answer); nothing after.
    expect(nodes[0]!.log.length - (before[0] as number)).toBeLessThanOrEqual(1);
    expect(nodes[1]!.log.length - (before[1] as number)).toBeLessThanOrEqual(1);
  });
});

describe("rate limits", () => {
  it("nodes answering 429 make RateLimitedError, and the retry waits their Retry-After", async () => {
    const limited = () => {
      const error = new NodeError("n", "n is rate-limited (HTTP 429)", { status: 429, retryAfterMs: 700 });
      return Promise.reject(error);
    };
    const nodes = fakeNodes(3);
    const asked: number[] = [];
    const wrapped = nodes.map((n) => ({
      id: n.id,
      command: () => {
        asked.push(Date.now());
        return limited();
      },
    }));
    const redlock = new PlainRedlock({ nodes: wrapped, clock: fakeClock, maxAttempts: 2, retryDelay: () => 10 });
    const error = await run(redlock.acquire("r", 10_000), 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitedError);
    expect((error as RateLimitedError).retryAfterMs).toBe(700);
    // The second attempt came no sooner than the nodes asked.
    const attemptStarts = [...new Set(asked)].sort((a, b) => a - b);
    expect((attemptStarts.at(-1) as number) - (attemptStarts[0] as number)).toBeGreaterThanOrEqual(700);
  });

  it("negative control: plain node errors stay QuorumUnavailableError", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.behaviour = { kind: "error" };
    const redlock = new PlainRedlock({ nodes, clock: fakeClock, maxAttempts: 1 });
    expect(await run(redlock.acquire("r", 10_000), 1).catch((e: unknown) => e)).toBeInstanceOf(QuorumUnavailableError);
  });
});
