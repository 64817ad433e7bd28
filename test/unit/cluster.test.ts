/**
 * The cluster fingerprint (src/cluster.ts, src/fingerprint.ts) on in-memory nodes: clients of
 * different node lists that share nodes are refused, however the acquisition is called; clients of
 * one cluster (any order, any display id, another keyPrefix) are not; a node that did not answer is
 * asked again; a reset after a drain lets the new list in and refuses the old one.
 */
import { describe, expect, it } from "vitest";
import { clusterFingerprint, clusterKey, fnv1a64 } from "../../src/core/fingerprint.js";
import { ConfigurationError, type Lock, type RedisNode, Redlock, type RedlockOptions } from "../../src/index.js";
import { type FakeNode, fakeClock, fakeNodes, isClusterCheck } from "./support/fake-node.js";
import { run, useFakeTime } from "./support/fake-time.js";

useFakeTime();

type Config = RedlockOptions & { clusterName?: string };

function client(nodes: readonly RedisNode[], options: Config = {}) {
  return new Redlock({ nodes, clock: fakeClock, retryDelay: () => 20, ...options });
}

/** The same nodes as new objects: a client made of them shares nothing with the others in this process, like a client of another isolate. */
function inAnotherIsolate(nodes: readonly FakeNode[]): RedisNode[] {
  return nodes.map((node) => ({ id: node.id, command: (args, signal) => node.command(args, signal) }));
}

const checks = (node: FakeNode) => node.log.filter(isClusterCheck).length;

describe("the fingerprint", () => {
  it("is 64-bit FNV-1a of the protocol version and the sorted servers: pinned, since a change refuses every running client", () => {
    expect([fnv1a64(""), fnv1a64("a"), fnv1a64("foobar")]).toEqual([
      "cbf29ce484222325",
      "af63dc4c8601ec8c",
      "85944171f73967e8",
    ]);
    expect(clusterFingerprint(["https://c.example", "https://a.example/db", "https://b.example"])).toBe(
      "v2:ac2bf1eb8e111cb0",
    );
    expect(clusterFingerprint(["https://b.example", "https://c.example", "https://a.example/db"])).toBe(
      "v2:ac2bf1eb8e111cb0",
    );
    expect(clusterFingerprint(["https://a.example"], "production")).toBe("v2:1629feee35b1c42f");
    expect(clusterKey("app:")).toBe('__edge-redlock__:cluster:"app:"');
  });
});

describe("clients of different node lists over shared nodes", () => {
  it("the second is refused on every call, and never returns a lock: [0,1,2] then [2,3,4]", async () => {
    const nodes = fakeNodes(5);
    const a = client(nodes.slice(0, 3));
    const b = client(nodes.slice(2, 5), { maxAttempts: 1 });
    const aLock = await run(a.acquire("r", 10_000));
    const error = await run(b.acquire("other", 10_000)).catch((e) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error.code).toBe("CONFIGURATION");
    expect(error.node).toBe("n2");
    expect(error.message).toContain(
      "node 1 (n2) of this client's 3 nodes already belongs to a cluster of another node list",
    );
    // The fingerprints are named, never shown.
    const kept = nodes[2]?.get(clusterKey("")) as string;
    expect(kept).toMatch(/^v2:/);
    expect(error.message).not.toContain(kept.slice(3));
    // What B set alongside the check was released: no node keeps B's key.
    await run(b.settled());
    for (const node of nodes) expect(node.get("other")).toBeUndefined();
    // Refused on every call, whichever way it asks, also while the lock is held.
    await expect(run(b.tryAcquire("r", 10_000))).rejects.toBeInstanceOf(ConfigurationError);
    let ran = false;
    const using = b.using("u", 10_000, async () => {
      ran = true;
    });
    await expect(run(using)).rejects.toBeInstanceOf(ConfigurationError);
    expect(ran).toBe(false);
    // A is not disturbed.
    await run(aLock.release());
    expect(await run(a.tryAcquire("r", 10_000))).not.toBeNull();
  });

  it("a lock granted before the refusal arrives is released, never returned", async () => {
    const nodes = fakeNodes(5);
    await run((await run(client(nodes.slice(0, 3)).acquire("a", 10_000))).release());
    // The check answers 50 ms after the acquisition did: B holds "r" on 2, 3 and 4 by then.
    for (const node of nodes) node.latency = (args) => ({ requestMs: 0, replyMs: isClusterCheck(args) ? 50 : 0 });
    const b = client(nodes.slice(2, 5), { maxAttempts: 1 });
    const error = await run(b.acquire("r", 10_000), 1).catch((e) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    // Nodes 3 and 4 (B's alone) granted it, and were sent the release before the error.
    expect(nodes.slice(3).map((n) => n.lockLog.map((c) => c[0]))).toEqual([
      ["SET", "EVALSHA"],
      ["SET", "EVALSHA"],
    ]);
    for (const node of nodes) expect(node.get("r")).toBeUndefined();
  });

  it("a refused acquisition that found the lock held is refused, not reported held", async () => {
    const nodes = fakeNodes(5);
    await run((await run(client(nodes.slice(0, 3)).acquire("a", 10_000))).release());
    for (const node of nodes.slice(2)) node.occupy("r", "foreign", 60_000);
    // The check answers after the first attempt was refused: B is waiting by then. Its signal is
    // the caller's alone (see Cluster.acquire), so the wait ends by its own limit.
    for (const node of nodes) node.latency = (args) => ({ requestMs: 0, replyMs: isClusterCheck(args) ? 50 : 0 });
    const b = client(nodes.slice(2, 5), { acquireTimeoutMs: 2000 });
    await expect(run(b.acquire("r", 10_000))).rejects.toBeInstanceOf(ConfigurationError);
    await expect(run(b.tryAcquire("r", 10_000))).rejects.toBeInstanceOf(ConfigurationError);
  });

  it("clients of one cluster are not refused: any order, display ids, another keyPrefix, another isolate", async () => {
    const nodes = fakeNodes(3);
    const a = client(nodes);
    const renamed = inAnotherIsolate(nodes).reverse();
    const b = client(renamed);
    const locks: Lock[] = [];
    locks.push(await run(a.acquire("a", 10_000)), await run(b.acquire("b", 10_000)));
    // Another namespace keeps a fingerprint of its own: [0,1] is not refused by [0,1,2] there.
    const c = client(nodes.slice(0, 2), { keyPrefix: "other:" });
    locks.push(await run(c.acquire("a", 10_000)));
    expect(nodes[0]?.get(clusterKey("other:"))).not.toBe(nodes[0]?.get(clusterKey("")));
    for (const lock of locks) await run(lock.release());
  });

  it("a clusterName replaces the node list: equal names pass, another name is refused", async () => {
    const nodes = fakeNodes(5);
    const a = client(nodes.slice(0, 3), { clusterName: "prod" });
    const b = client(nodes.slice(2, 5), { clusterName: "prod" });
    const c = client(nodes.slice(2, 5), { clusterName: "staging", maxAttempts: 1 });
    await run((await run(a.acquire("a", 10_000))).release());
    await run((await run(b.acquire("b", 10_000))).release());
    await expect(run(c.acquire("c", 10_000))).rejects.toBeInstanceOf(ConfigurationError);
    expect(() => client(nodes, { clusterName: "" })).toThrow(ConfigurationError);
  });

  it("a node kept by a client of another protocol version refuses, naming the version", async () => {
    const nodes = fakeNodes(3);
    nodes[1]?.store.set(clusterKey(""), { value: "v3:0123456789abcdef", expiresAt: Infinity });
    const error = await run(client(nodes, { maxAttempts: 1 }).acquire("r", 10_000)).catch((e) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error.message).toContain(
      "node 2 (n1) of this client's 3 nodes already belongs to a cluster of protocol version 3",
    );
  });

  it("an answer that is no fingerprint is a node error, not a refusal", async () => {
    const nodes = fakeNodes(3);
    nodes[0]?.store.set(clusterKey(""), { value: "<html>", expiresAt: Infinity });
    const lock = await run(client(nodes).acquire("r", 10_000));
    expect(lock.acquireReport.ok).toBe(true);
    await run(lock.release());
  });
});

describe("nodes that did not answer the check", () => {
  it("are asked again alongside later acquisitions, and a foreign fingerprint found then refuses the next", async () => {
    const nodes = fakeNodes(5);
    // B = [2,3,4] checks while node 2 is down: 3 and 4 are a quorum, so B goes on (the limit:
    // only the shared node can tell, and only when it answers).
    nodes[2]!.behaviour = { kind: "error" };
    const b = client(nodes.slice(2, 5), { maxAttempts: 1 });
    await run((await run(b.acquire("r", 10_000))).release());
    nodes[2]!.behaviour = { kind: "ok" };
    // Meanwhile A = [0,1,2] came first to node 2.
    await run((await run(client(nodes.slice(0, 3)).acquire("a", 10_000))).release());
    // B's next acquisition asks node 2 again, alongside; the one after is refused.
    const before = checks(nodes[2]!);
    await run((await run(b.acquire("r", 10_000))).release());
    expect(checks(nodes[2]!)).toBe(before + 1);
    await expect(run(b.acquire("r", 10_000))).rejects.toBeInstanceOf(ConfigurationError);
  });

  it("once every node confirmed, an acquisition sends no check at all", async () => {
    const nodes = fakeNodes(3);
    const a = client(nodes);
    await run((await run(a.acquire("r", 10_000))).release());
    const before = nodes.map(checks);
    for (let i = 0; i < 3; i++) await run((await run(a.acquire("r", 10_000))).release());
    expect(nodes.map(checks)).toEqual(before);
    expect(before).toEqual([1, 1, 1]);
  });
});

describe("resetClusterFingerprint", () => {
  it("after the old list is drained, the new list's reset lets it in and refuses the old one", async () => {
    const nodes = fakeNodes(5);
    await run((await run(client(nodes.slice(0, 3)).acquire("r", 10_000))).release());
    const b = client(nodes.slice(2, 5), { maxAttempts: 1 });
    await expect(run(b.acquire("r", 10_000))).rejects.toBeInstanceOf(ConfigurationError);
    const result = await run(b.resetClusterFingerprint());
    expect(result.reset).toBe(3);
    expect(result.nodes.map((n) => n.outcome)).toEqual(["initialized", "initialized", "initialized"]);
    // The refusal was not kept: B's next call goes through.
    await run((await run(b.acquire("r", 10_000))).release());
    // A client of the old list starting now (another isolate) is refused by node 2.
    const old = client(inAnotherIsolate(nodes.slice(0, 3)), { maxAttempts: 1 });
    await expect(run(old.acquire("r", 10_000))).rejects.toBeInstanceOf(ConfigurationError);
  });
});
