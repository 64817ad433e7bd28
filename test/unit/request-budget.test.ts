/**
 * `requestBudget`: what one acquisition may send (its lock's release kept in reserve), in the plain
 * preset and in the default client, counted on the nodes themselves.
 */
import { describe, expect, it } from "vitest";
import { Redlock as PlainRedlock } from "../../src/core/index.js";
import { ConfigurationError, Redlock, RequestBudgetError } from "../../src/index.js";
import { type FakeNode, fakeClock, fakeNodes } from "./support/fake-node.js";
import { run, useFakeTime } from "./support/fake-time.js";

useFakeTime();

/** Every command the nodes received. */
const received = (nodes: readonly FakeNode[]) => nodes.reduce((sum, n) => sum + n.log.length, 0);

describe("requestBudget", () => {
  it("is refused below one attempt and the release on every node", () => {
    expect(() => new Redlock({ nodes: fakeNodes(3), requestBudget: 5 })).toThrow(ConfigurationError);
    expect(() => new Redlock({ nodes: fakeNodes(3), requestBudget: 6 })).not.toThrow();
    expect(() => new Redlock({ nodes: fakeNodes(3), requestBudget: Infinity })).not.toThrow();
  });

  it.each([
    ["the plain preset", PlainRedlock],
    ["the default client", Redlock],
  ])("%s gives up with RequestBudgetError before sending more than the budget less the release", async (_, Client) => {
    const nodes = fakeNodes(3);
    for (const n of nodes.slice(1)) n.behaviour = { kind: "error" };
    const redlock = new Client({ nodes, clock: fakeClock, maxAttempts: 1000, retryDelay: () => 10, requestBudget: 20 });
    let atReturn = 0;
    const call = redlock.acquire("r", 1000).catch((e: unknown) => {
      atReturn = received(nodes);
      return e;
    });
    const error = await run(call, 1);
    expect(error).toBeInstanceOf(RequestBudgetError);
    const budget = error as RequestBudgetError;
    expect(budget.budget).toBe(20);
    // What the budget counted: the cluster check (one request per node), its attempts, and the
    // cleanup of its failed attempts, sent or still owed (each failed attempt owes a release on
    // the node that said yes and on the two that failed), with 3 requests kept for a release.
    const attempted = budget.attempts.reduce((sum, report) => sum + report.requests, 0);
    expect(budget.sent).toBeGreaterThanOrEqual(3 + attempted);
    expect(budget.sent).toBeLessThanOrEqual(20 - 3);
    // What the nodes received until the call returned is no more than that.
    expect(atReturn).toBeLessThanOrEqual(budget.sent);
    expect(atReturn).toBeGreaterThan(3 + attempted);
    expect(budget.attempts.length, "it retried before the budget ran out").toBeGreaterThanOrEqual(2);
  });

  it("negative control: without a budget the same call keeps sending until its attempts run out", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes.slice(1)) n.behaviour = { kind: "error" };
    const redlock = new Redlock({
      nodes,
      clock: fakeClock,
      maxAttempts: 10,
      retryDelay: () => 10,
      requestBudget: Infinity,
    });
    const error = await run(redlock.acquire("r", 1000), 1).catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(RequestBudgetError);
    expect(received(nodes)).toBeGreaterThan(20);
  });
});

describe("sweeps of a node whose answer never came", () => {
  it.each([
    ["the plain preset", PlainRedlock],
    ["the default client", Redlock],
  ])("%s: wait until the call returned, then delete a SET that landed late", async (_, Client) => {
    // Node 0 applies a SET 1.5 s after it was sent, past the request deadline (1 s with a 10 s
    // TTL); the others hold the key for someone else. tryAcquire() is refused at once; node 0's
    // request times out, its first release finds nothing, and only a sweep can delete the key the
    // SET writes later. The sweep runs once the call returned, long before the key would expire.
    const nodes = fakeNodes(3);
    for (const n of nodes.slice(1)) n.occupy("r", "elsewhere", 60_000);
    const node0 = nodes[0] as FakeNode;
    node0.latency = (args) => (args[0] === "SET" ? { requestMs: 1500, replyMs: 0 } : { requestMs: 1, replyMs: 1 });
    const redlock = new Client({ nodes, clock: fakeClock });
    expect(await run(redlock.tryAcquire("r", 10_000), 1)).toBeNull();
    await run(new Promise((resolve) => setTimeout(resolve, 1600)), 1);
    expect(node0.get("r"), "the late SET landed").toBeDefined();
    await run(new Promise((resolve) => setTimeout(resolve, 3000)), 1);
    expect(node0.get("r"), "a sweep deleted it").toBeUndefined();
  });
});
