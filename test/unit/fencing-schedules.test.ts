/**
 * Hand-written schedules that show each safeguard has teeth: the same adversarial schedule breaks
 * the token's uniqueness or monotonicity when the safeguard is missing, and does not when it is
 * there. The checkers are the ones the property tests use.
 */
import { describe, expect, it } from "vitest";
import { fanOut } from "../../src/core/fanout.js";
import { releaseOnNode } from "../../src/core/node-operations.js";
import { fencedAttempt } from "../../src/fencing/attempt.js";
import { fenceAcquireScript } from "../../src/fencing/scripts/fence-acquire.js";
import { fenceRatchetScript } from "../../src/fencing/scripts/fence-ratchet.js";
import type { RedisArgument } from "../../src/transport/rest.js";
import { FakeNode, fakeClock, type MessageDelay } from "./support/fake-node.js";
import { settle, timerByTimer, useFakeTime } from "./support/fake-time.js";
import { duplicateFences, type Grant, markInitialized, monotonicityViolations } from "./support/fencing-harness.js";

useFakeTime();

/** Let fake time run, timer by timer, until `promise` settles. */
function run<T>(promise: Promise<T>): Promise<T> {
  return settle(promise, timerByTimer());
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const instant: MessageDelay = { requestMs: 0, replyMs: 0 };
const lost: MessageDelay = { requestMs: 0, replyMs: 0, drop: true };
const isScript = (args: readonly RedisArgument[], sha1: string) => args[0] === "EVALSHA" && args[1] === sha1;
/** Whether a command carries a token starting with `prefix` (client B uses tokB0, tokB1, ...). */
const carries = (args: readonly RedisArgument[], prefix: string) =>
  args.some((arg) => typeof arg === "string" && arg.startsWith(prefix));

function nodes3(): FakeNode[] {
  const nodes = [new FakeNode("n0"), new FakeNode("n1"), new FakeNode("n2")];
  markInitialized(nodes);
  for (const node of nodes) node.latency = () => instant;
  return nodes;
}

function release(nodes: readonly FakeNode[], token: string, resources: readonly string[]): Promise<unknown> {
  const fan = fanOut({
    nodeIds: nodes.map((n) => n.id),
    yes: "released",
    quorum: 1,
    timeoutMs: 100,
    clock: fakeClock,
    task: (i, context) => releaseOnNode(nodes[i] as FakeNode, resources, token, context),
  });
  return fan.outcomes;
}

describe("the write-back: INCR-and-max versus the CAS ratchet (safety.md §B.3)", () => {
  // Three operations in sequence, each reaching two of the three nodes: {a,b}, {a,c}, {b,c}.
  const reach = [
    [0, 1],
    [0, 2],
    [1, 2],
  ];

  it("INCR where reachable, take the max: the third operation repeats the second's token", async () => {
    const nodes = nodes3();
    let logical = 0;
    const grants: Grant[] = [];
    for (const [op, reachable] of reach.entries()) {
      const invokedAt = ++logical;
      const values = await run(
        Promise.all(
          reachable.map((i) => (nodes[i] as FakeNode).command(["INCR", "naive:r"], new AbortController().signal)),
        ),
      );
      grants.push({ client: op, fence: Math.max(...(values as number[])), invokedAt, returnedAt: ++logical });
    }
    expect(grants.map((g) => g.fence)).toEqual([1, 2, 2]);
    expect(monotonicityViolations(grants)).toHaveLength(1);
  });

  it("the fenced protocol on the same reachability gives 1, 2, 3", async () => {
    const nodes = nodes3();
    let current: readonly number[] = [];
    nodes.forEach((node, i) => {
      node.latency = () => (current.includes(i) ? instant : lost);
    });
    let logical = 0;
    const grants: Grant[] = [];
    for (const [op, reachable] of reach.entries()) {
      current = reachable;
      const token = `op${op}`;
      const invokedAt = ++logical;
      const result = await run(
        fencedAttempt({
          nodes,
          keyPrefix: "",
          resources: ["r"],
          token,
          ttlMs: 1000,
          quorum: 2,
          requestTimeoutMs: 100,
          quarantineMs: 1012,
          clock: fakeClock,
        }),
      );
      expect(result.granted).toBe(true);
      grants.push({ client: op, fence: Number(result.fence), invokedAt, returnedAt: ++logical });
      await run(release(nodes, token, ["r"]));
    }
    expect(grants.map((g) => g.fence)).toEqual([1, 2, 3]);
    expect(monotonicityViolations(grants)).toEqual([]);
  });
});

describe("quarantine: a lost node is repaired only after every in-flight write of its old self landed or died", () => {
  /**
   * Nodes i (n0), a (n1), b (n2); quorum 2. Grant A takes i and a in phase 1 (its SET on b lands
   * but the answer comes too late to count); A's phase 2 is ACKed by i at once, while its write to
   * a takes 900 ms. Node i restarts empty 10 ms in. Client B, which cannot reach a for locking,
   * keeps trying: its attempts quarantine i, later repair it, and finally take the lock on {i, b}
   * once A's key on b expired, which is after A returned.
   *
   * With a quarantine shorter than the TTL, the repair reads a before A's write lands, i comes
   * back with counter 0, and B's token equals A's. With the quarantine the library requires
   * (TTL + drift), the repair happens after A's write landed (or could no longer land) and B's
   * token is larger.
   */
  async function schedule(quarantineMs: number): Promise<Grant[]> {
    const nodes = nodes3();
    const [i, a, b] = nodes as [FakeNode, FakeNode, FakeNode];
    a.latency = (args) => {
      if (carries(args, "tokA") && isScript(args, fenceRatchetScript.sha1)) return { requestMs: 900, replyMs: 0 };
      if (carries(args, "tokB") && isScript(args, fenceAcquireScript.sha1)) return lost;
      return instant;
    };
    b.latency = (args) =>
      carries(args, "tokA") && isScript(args, fenceAcquireScript.sha1) ? { requestMs: 0, replyMs: 5000 } : instant;
    setTimeout(() => i.restart(), 10);

    let logical = 0;
    const grants: Grant[] = [];
    const common = { nodes, keyPrefix: "", resources: ["r"], ttlMs: 1000, quorum: 2, quarantineMs, clock: fakeClock };
    const clientA = (async () => {
      const invokedAt = ++logical;
      const result = await fencedAttempt({ ...common, token: "tokA", requestTimeoutMs: 2000 });
      if (result.granted) grants.push({ client: 0, fence: Number(result.fence), invokedAt, returnedAt: ++logical });
    })();
    const clientB = (async () => {
      await sleep(20);
      for (let attempt = 0; attempt < 60; attempt++) {
        const token = `tokB${attempt}`;
        const invokedAt = ++logical;
        const result = await fencedAttempt({ ...common, token, requestTimeoutMs: 100 });
        if (result.granted) {
          grants.push({ client: 1, fence: Number(result.fence), invokedAt, returnedAt: ++logical });
          return;
        }
        await release(nodes, token, ["r"]);
        await result.maintenance;
        await sleep(50);
      }
    })();
    await run(Promise.all([clientA, clientB]));
    return grants;
  }

  it("without it (1 ms): B's token repeats A's, after A returned", async () => {
    const grants = await schedule(1);
    expect(grants).toHaveLength(2);
    expect(grants.map((g) => g.fence)).toEqual([1, 1]);
    expect(duplicateFences(grants)).toHaveLength(1);
    expect(monotonicityViolations(grants)).toHaveLength(1);
  });

  it("with it (TTL + drift): B's token is larger", async () => {
    const grants = await schedule(1012);
    expect(grants).toHaveLength(2);
    const [first, second] = grants as [Grant, Grant];
    expect(first.returnedAt).toBeLessThan(second.invokedAt);
    expect(second.fence).toBeGreaterThan(first.fence);
    expect(duplicateFences(grants)).toEqual([]);
    expect(monotonicityViolations(grants)).toEqual([]);
  });
});

describe("faultTolerance: a silent rollback (failover that loses recent writes)", () => {
  it("with a majority quorum, a rollback on one node of A's quorum lets B repeat A's token", async () => {
    const nodes = nodes3();
    const [a, b, c] = nodes as [FakeNode, FakeNode, FakeNode];
    const before = b.snapshot();
    c.latency = (args) => (carries(args, "tokA") ? lost : instant); // A's quorum is {a, b}
    a.latency = (args) => (carries(args, "tokB") ? lost : instant); // B's quorum is {b, c}
    const common = { nodes, keyPrefix: "", resources: ["r"], ttlMs: 1000, quorum: 2, quarantineMs: 1012 };
    const requestTimeoutMs = 100;
    const resultA = await run(fencedAttempt({ ...common, token: "tokA", requestTimeoutMs, clock: fakeClock }));
    const grants: Grant[] = [{ client: 0, fence: Number(resultA.fence), invokedAt: 1, returnedAt: 2 }];
    await run(release(nodes, "tokA", ["r"]));
    b.restore(before); // b fails over to a replica that never saw A's write; its marker survives
    const resultB = await run(fencedAttempt({ ...common, token: "tokB", requestTimeoutMs, clock: fakeClock }));
    grants.push({ client: 1, fence: Number(resultB.fence), invokedAt: 3, returnedAt: 4 });
    expect([resultA.granted, resultB.granted]).toEqual([true, true]);
    expect(monotonicityViolations(grants)).toHaveLength(1);
  });

  it("with faultTolerance 1 (quorum 3 of 3), the same rollback cannot hide A's token", async () => {
    const nodes = nodes3();
    const b = nodes[1] as FakeNode;
    const before = b.snapshot();
    const common = { nodes, keyPrefix: "", resources: ["r"], ttlMs: 1000, quorum: 3, quarantineMs: 1012 };
    const resultA = await run(fencedAttempt({ ...common, token: "tokA", requestTimeoutMs: 100, clock: fakeClock }));
    await run(release(nodes, "tokA", ["r"]));
    b.restore(before);
    const resultB = await run(fencedAttempt({ ...common, token: "tokB", requestTimeoutMs: 100, clock: fakeClock }));
    expect([resultA.fence, resultB.fence]).toEqual(["1", "2"]);
  });
});
