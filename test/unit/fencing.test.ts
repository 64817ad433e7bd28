/** Unit tests of the fencing modules on in-memory nodes and a fake clock. */
import { describe, expect, it } from "vitest";
import { FencingError, InvalidArgumentError, NodeError } from "../../src/base/errors.js";
import { assertQuarantineCovers, fencingQuorum, proposeFence, raiseFence } from "../../src/fencing/arithmetic.js";
import { fencedAttempt } from "../../src/fencing/attempt.js";
import { compareFences, fencedWriteScript } from "../../src/fencing/guard.js";
import { fencing, initializeFencing as initializeClient } from "../../src/fencing/index.js";
import { initializeFencing } from "../../src/fencing/initialize.js";
import { fencingKeys, isReservedResource } from "../../src/fencing/keys.js";
import { parseFenceReply } from "../../src/fencing/replies.js";
import { fenceRatchetScript } from "../../src/fencing/scripts/fence-ratchet.js";
import { Redlock } from "../../src/index.js";
import type { RedisReply } from "../../src/transport/rest.js";
import { type FakeNode, fakeClock, fakeNodes } from "./support/fake-node.js";
import { inSteps, settle, useFakeTime } from "./support/fake-time.js";
import { markInitialized } from "./support/fencing-harness.js";

useFakeTime();

/** Let fake time run, 1 ms at a time, until `promise` settles. */
function run<T>(promise: Promise<T>): Promise<T> {
  return settle(promise, inSteps(1, 10_000));
}

const keys = fencingKeys("");

function attempt(nodes: FakeNode[], token: string, overrides: Partial<Parameters<typeof fencedAttempt>[0]> = {}) {
  return run(
    fencedAttempt({
      nodes,
      keyPrefix: "",
      resources: ["r"],
      token,
      ttlMs: 1000,
      quorum: Math.floor(nodes.length / 2) + 1,
      requestTimeoutMs: 100,
      quarantineMs: 1012,
      clock: fakeClock,
      ...overrides,
    }),
  );
}

describe("arithmetic", () => {
  it("sizes the quorum as floor((N + f) / 2) + 1, between a majority and N", () => {
    expect([0, 1, 2, 3, 4].map((f) => fencingQuorum(5, f))).toEqual([3, 4, 4, 5, 5]);
    expect([0, 1, 2].map((f) => fencingQuorum(3, f))).toEqual([2, 3, 3]);
    expect([0, 1].map((f) => fencingQuorum(4, f))).toEqual([3, 3]);
    expect(fencingQuorum(5, 0, 4)).toBe(4);
    expect(fencingQuorum(5, 1, 3)).toBe(4);
    expect(() => fencingQuorum(5, 5)).toThrow(InvalidArgumentError);
    expect(() => fencingQuorum(5, -1)).toThrow(InvalidArgumentError);
    expect(() => fencingQuorum(5, 0.5)).toThrow(InvalidArgumentError);
    expect(() => fencingQuorum(5, 0, 2)).toThrow(InvalidArgumentError);
    expect(() => fencingQuorum(5, 0, 6)).toThrow(InvalidArgumentError);
  });

  it("proposes one above the highest counter read, and raises past every refusal", () => {
    expect(proposeFence([])).toBe(1);
    expect(proposeFence([3, 7, 0])).toBe(8);
    expect(raiseFence(8, [12, 9])).toBe(13);
    expect(raiseFence(8, [])).toBe(9);
    expect(() => proposeFence([Number.MAX_SAFE_INTEGER])).toThrow(RangeError);
  });

  it("requires a quarantine of at least TTL + drift", () => {
    expect(() => assertQuarantineCovers(1000, 1012, 0.01)).not.toThrow();
    expect(() => assertQuarantineCovers(1000, 1011, 0.01)).toThrow(InvalidArgumentError);
  });

  it("compares fences as numbers, whatever their length", () => {
    expect(compareFences("9", "10")).toBeLessThan(0);
    expect(compareFences("10", "10")).toBe(0);
    expect(compareFences("9007199254740991", "10")).toBeGreaterThan(0);
  });
});

describe("key naming", () => {
  it("keeps fencing state under four reserved names per keyPrefix", () => {
    expect(fencingKeys("app:")).toEqual({
      incarnation: "app:__edge-redlock__:incarnation",
      quarantine: "app:__edge-redlock__:quarantine",
      counters: "app:__edge-redlock__:fence",
      repairs: "app:__edge-redlock__:repaired",
    });
    expect(isReservedResource("__edge-redlock__:fence")).toBe(true);
    expect(isReservedResource("invoice:42")).toBe(false);
  });
});

describe("reply validation", () => {
  it("accepts exactly {status, canonical fence, incarnation}", () => {
    expect(parseFenceReply("n", "fence-acquire", ["OK", "41", "ab12"])).toEqual({
      status: "OK",
      fence: 41,
      incarnation: "ab12",
    });
    expect(parseFenceReply("n", "fence-acquire", ["NO_MARKER", "0", ""]).status).toBe("NO_MARKER");
  });

  const bad: [string, RedisReply][] = [
    ["a number", 1],
    ["an HTML page", "<html>oops</html>"],
    ["two elements", ["OK", "1"]],
    ["four elements", ["OK", "1", "ab", "x"]],
    ["an unknown status", ["YES", "1", "ab"]],
    ["another script's status", ["ACK", "1", "ab"]],
    ["a number for the fence", ["OK", 1, "ab"]],
    ["a leading zero", ["OK", "01", "ab"]],
    ["a fraction", ["OK", "1.5", "ab"]],
    ["a negative fence", ["OK", "-1", "ab"]],
    ["a fence above 2^53 - 1", ["OK", "9007199254740992", "ab"]],
    ["no incarnation on OK", ["OK", "1", ""]],
    ["a non-hex incarnation", ["OK", "1", "zz"]],
    ["null", null],
  ];
  for (const [label, reply] of bad) {
    it(`rejects ${label} as a node error`, () => {
      expect(() => parseFenceReply("n", "fence-acquire", reply)).toThrow(NodeError);
    });
  }
});

describe("initialisation", () => {
  it("an uninitialised deployment refuses fenced locks with a clear reason and writes nothing", async () => {
    const nodes = fakeNodes(3);
    const result = await attempt(nodes, "t1");
    expect(result.granted).toBe(false);
    expect(result.reason).toBe("uninitialized");
    // The vote was lost after two answers; the reason waited for the third.
    expect(result.phases[0]?.nodes.slice(0, 2).map((n) => n.outcome)).toEqual(["no-marker", "no-marker"]);
    await run(result.maintenance);
    for (const node of nodes) {
      expect(node.get("r")).toBeUndefined();
      expect(node.get(keys.incarnation)).toBeUndefined(); // never self-initialised nor quarantined
    }
  });

  it("marks every fresh node once; a second run is refused", async () => {
    const nodes = fakeNodes(3);
    const result = await run(initializeFencing({ nodes, clock: fakeClock }));
    expect(result.initialized).toBe(3);
    for (const node of nodes) expect(node.get(keys.incarnation)).toMatch(/^ok:[0-9a-f]{40}$/);
    const again = await run(initializeFencing({ nodes, clock: fakeClock })).catch((e) => e);
    expect(again).toBeInstanceOf(FencingError);
    expect(again.code).toBe("FENCING_INIT_REFUSED");
    expect((await attempt(nodes, "t1")).fence).toBe("1");
  });

  it("refuses when one node carries a marker: the empty ones are lost, not fresh", async () => {
    const nodes = fakeNodes(3);
    markInitialized([nodes[0] as FakeNode]);
    const error = await run(initializeFencing({ nodes, clock: fakeClock })).catch((e) => e);
    expect(error).toBeInstanceOf(FencingError);
    expect(error.code).toBe("FENCING_INIT_REFUSED");
    expect(nodes[1]?.get(keys.incarnation)).toBeUndefined();
  });

  it("refuses when a node cannot be asked, and marks none", async () => {
    const nodes = fakeNodes(3);
    (nodes[2] as FakeNode).behaviour = { kind: "error" };
    const error = await run(initializeFencing({ nodes, clock: fakeClock })).catch((e) => e);
    expect(error.code).toBe("FENCING_INIT_REFUSED");
    for (const node of nodes.slice(0, 2)) expect(node.get(keys.incarnation)).toBeUndefined();
  });

  it("after a partial initialisation the unmarked node is quarantined, not trusted", async () => {
    const nodes = fakeNodes(3);
    markInitialized(nodes.slice(0, 2));
    const result = await attempt(nodes, "t1");
    expect(result.granted).toBe(true);
    const maintenance = await run(result.maintenance);
    expect(maintenance.quarantined).toEqual(["n2"]);
    expect(nodes[2]?.get(keys.incarnation)).toMatch(/^recovering:/);
    expect(nodes[2]?.get(keys.quarantine)).toBeDefined();
  });
});

describe("fenced attempts", () => {
  it("grants 1, 2, 3 in sequence; release leaves the counter alone", async () => {
    const nodes = fakeNodes(5);
    markInitialized(nodes);
    const fences: (string | undefined)[] = [];
    for (const token of ["t1", "t2", "t3"]) {
      const result = await attempt(nodes, token);
      expect(result.granted).toBe(true);
      fences.push(result.fence);
      for (const node of nodes) node.store.delete("r"); // released
    }
    expect(fences).toEqual(["1", "2", "3"]);
  });

  it("costs 2 round trips: N phase-1 requests, then one per node that granted phase 1", async () => {
    const nodes = fakeNodes(5);
    markInitialized(nodes);
    for (const node of nodes) node.behaviour = { kind: "ok", latencyMs: 10 };
    const result = await attempt(nodes, "t1");
    const granting = result.phases[0]?.nodes.filter((n) => n.outcome === "acquired").length ?? 0;
    expect(result.phases.map((p) => p.phase)).toEqual(["acquire", "ratchet"]);
    expect(granting).toBeGreaterThanOrEqual(3);
    expect(result.requests).toBe(5 + granting);
    expect(result.decidedAt - result.startedAt).toBe(20);
  });

  it("a multi-resource lock takes one token above every resource's counter and raises them all", async () => {
    const nodes = fakeNodes(3);
    markInitialized(nodes);
    for (const node of nodes) node.hashes.set(keys.counters, new Map([["a", "5"]]));
    const result = await attempt(nodes, "t1", { resources: ["a", "b"] });
    expect(result.fence).toBe("6");
    for (const node of nodes.slice(0, 2)) {
      expect(node.hget(keys.counters, "a")).toBe("6");
      expect(node.hget(keys.counters, "b")).toBe("6");
      expect([node.get("a"), node.get("b")]).toEqual(["t1", "t1"]);
    }
  });

  it("a lock held elsewhere is refused as held, and its BUSY counter still raises the next proposal", async () => {
    const nodes = fakeNodes(3);
    markInitialized(nodes);
    for (const node of nodes) node.occupy("r", "other");
    const result = await attempt(nodes, "t1");
    expect(result).toMatchObject({ granted: false, reason: "held" });
    for (const node of nodes) expect(node.get("r")).toBe("other");
  });

  it("retries phase 2 with a higher proposal when a concurrent proposer raised a counter", async () => {
    const nodes = fakeNodes(3);
    markInitialized(nodes);
    let raised = false;
    (nodes[1] as FakeNode).latency = (args) => {
      if (!raised && args[1] === fenceRatchetScript.sha1) {
        raised = true;
        (nodes[1] as FakeNode).hashes.set(keys.counters, new Map([["r", "50"]]));
      }
      return { requestMs: 0, replyMs: 0 };
    };
    const result = await attempt(nodes, "t1", { quorum: 3 });
    expect(result.phases.map((p) => [p.phase, p.fence])).toEqual([
      ["acquire", undefined],
      ["ratchet", "1"],
      ["ratchet", "51"],
    ]);
    expect(result.phases[1]?.nodes.map((n) => n.outcome)).toContain("outbid");
    expect(result.fence).toBe("51");
  });

  it("never counts a node with a corrupt counter or a garbage answer", async () => {
    const nodes = fakeNodes(3);
    markInitialized(nodes);
    (nodes[0] as FakeNode).hashes.set(keys.counters, new Map([["r", "1e3"]]));
    (nodes[1] as FakeNode).behaviour = { kind: "garbage" };
    const result = await attempt(nodes, "t1");
    expect(result.granted).toBe(false);
    expect(result.phases[0]?.nodes.slice(0, 2).map((n) => n.outcome)).toEqual(["error", "error"]);
  });

  it("a restarted node is quarantined, then repaired from a quorum before it counts again", async () => {
    const nodes = fakeNodes(3);
    markInitialized(nodes);
    // n0 answers first, so its outcome is in every phase-1 snapshot.
    for (const node of nodes.slice(1)) node.behaviour = { kind: "ok", latencyMs: 5 };
    expect((await attempt(nodes, "t1")).fence).toBe("1");
    for (const node of nodes) node.store.delete("r");
    (nodes[0] as FakeNode).restart();

    const second = await attempt(nodes, "t2");
    expect(second.phases[0]?.nodes[0]?.outcome).toBe("no-marker");
    expect(second.fence).toBe("2");
    expect((await run(second.maintenance)).quarantined).toEqual(["n0"]);
    for (const node of nodes) node.store.delete("r");

    const third = await attempt(nodes, "t3");
    expect(third.phases[0]?.nodes[0]?.outcome).toBe("quarantined");
    for (const node of nodes) node.store.delete("r");

    await run(new Promise((resolve) => setTimeout(resolve, 1012)));
    const fourth = await attempt(nodes, "t4");
    expect(fourth.phases[0]?.nodes[0]?.outcome).toBe("needs-repair");
    expect((await run(fourth.maintenance)).repaired).toEqual(["n0"]);
    expect(nodes[0]?.hget(keys.counters, "r")).toBe(fourth.fence);
    for (const node of nodes) node.store.delete("r");

    const fifth = await attempt(nodes, "t5");
    expect(fifth.phases[0]?.nodes[0]?.outcome).toBe("acquired");
    expect(Number(fifth.fence)).toBeGreaterThan(Number(fourth.fence));
  });
});

describe("the fenced-write guard (resource side)", () => {
  async function write(node: FakeNode, fence: string, token: string, value: string) {
    return node.command(
      ["EVALSHA", fencedWriteScript.sha1, 2, "guard:acct", "acct", fence, token, value],
      new AbortController().signal,
    );
  }

  it("accepts newer fences and the same holder again; rejects older fences and an equal fence from another token", async () => {
    const [node] = fakeNodes(1) as [FakeNode];
    expect(await run(write(node, "5", "A", "v1"))).toEqual([1, "5"]);
    expect(await run(write(node, "5", "A", "v2"))).toEqual([1, "5"]);
    expect(await run(write(node, "5", "B", "x"))).toEqual([0, "5"]);
    expect(await run(write(node, "4", "C", "x"))).toEqual([0, "5"]);
    expect(await run(write(node, "6", "D", "v3"))).toEqual([1, "6"]);
    expect(node.get("acct")).toBe("v3");
    await expect(run(write(node, "0", "E", "x"))).rejects.toThrow(NodeError);
  });
});

describe("a fenced lock's release", () => {
  it("once every phase-1 request has answered, sends one release per node and nothing after", async () => {
    const nodes = fakeNodes(5);
    markInitialized(nodes);
    // Two nodes answer after the quorum decided phase 1: pending in the acquire report.
    nodes.forEach((node, i) => {
      node.behaviour = { kind: "ok", latencyMs: i < 3 ? 1 : 20 };
    });
    const redlock = new Redlock({ nodes, clock: fakeClock, fencing });
    const lock = await run(redlock.acquire("r", 5000));
    expect(lock.acquireReport.nodes.filter((n) => n.outcome === "pending").length).toBeGreaterThan(0);
    await run(new Promise((resolve) => setTimeout(resolve, 100)));
    await run(redlock.settled());
    const before = nodes.map((node) => node.log.length);
    await run(lock.release());
    // Anything the release leaves in the background (a sweep lasts up to the TTL) runs here.
    await run(redlock.settled());
    expect(nodes.map((node, i) => node.log.length - (before[i] as number))).toEqual([1, 1, 1, 1, 1]);
  });
});

describe("initializeFencing(redlock) refuses what is not a client", () => {
  it.each([
    ["the options of the internal function", { nodes: [] }],
    ["nothing", undefined],
    ["a string", "redis://"],
  ])("%s: InvalidArgumentError, no request sent", async (_, given) => {
    const error = await initializeClient(given as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as Error).message).toMatch(/a Redlock client/);
  });

  it("negative control: a client is initialised", async () => {
    const nodes = fakeNodes(3);
    const result = await run(initializeClient(new Redlock({ nodes, clock: fakeClock, fencing })));
    expect(result.initialized).toBe(3);
  });
});
