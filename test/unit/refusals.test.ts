/**
 * How refusals are classified and what they cost (issue 30): contention is never reported as an
 * outage because slower nodes had not answered yet, and a node that rejected its token gets no
 * cleanup or release requests afterwards.
 */
import { describe, expect, it } from "vitest";
import { Redlock as PlainRedlock } from "../../src/core/index.js";
import { LockHeldError, QuorumUnavailableError, Redlock } from "../../src/index.js";
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
