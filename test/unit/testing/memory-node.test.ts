/**
 * `edge-redlock/testing` as a user's test suite uses it: the library on three memory nodes, with
 * contention, outages, restarts and TTLs on fake time. The memory node's answers are held to a
 * real redis-server by test/integration/*-differential.test.ts; here, that the library runs on it
 * end to end, and that a node answering wrong is caught.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { fencedWriteScript, fencing, initializeFencing } from "../../../src/fencing/index.js";
import {
  InvalidArgumentError,
  LockHeldError,
  NodeError,
  QuorumUnavailableError,
  type RedisNode,
  Redlock,
} from "../../../src/index.js";
import { type MemoryNode, memoryNode, memoryNodes } from "../../../src/testing/index.js";

const cluster = (): MemoryNode[] => [memoryNode(), memoryNode(), memoryNode()];

/** Whether a second client is refused a lock the first holds (the property a user's test asserts). */
async function exclusive(nodes: readonly RedisNode[]): Promise<boolean> {
  const first = new Redlock({ nodes });
  const second = new Redlock({ nodes });
  const held = await first.acquire("exclusive", 10_000);
  const also = await second.tryAcquire("exclusive", 10_000);
  await held.release();
  return also === null;
}

/** A node that says yes to everything: every SET NX succeeds and every script answers 1. */
function yesNode(node: MemoryNode): RedisNode {
  return {
    id: node.id,
    async command(args, signal) {
      if (args[0] === "SET") return "OK";
      if (args[0] === "EVALSHA" || args[0] === "EVAL") {
        const reply = await node.command(args, signal);
        return typeof reply === "number" ? 1 : reply;
      }
      return node.command(args, signal);
    },
  };
}

describe("a user's flow on three memory nodes", () => {
  it("acquires, extends and releases a lock: its key on every node, with the TTL asked for", async () => {
    const nodes = cluster();
    const redlock = new Redlock({ nodes });
    const lock = await redlock.acquire("orders:42", 10_000);
    const key = lock.keys[0] as string;
    for (const node of nodes) {
      expect(node.get(key)).toBe(lock.token);
      expect(node.pttl(key)).toBeGreaterThan(9_000);
      expect(node.pttl(key)).toBeLessThanOrEqual(10_000);
    }
    await lock.extend(30_000);
    for (const node of nodes) expect(node.pttl(key)).toBeGreaterThan(20_000);
    expect((await lock.verify()).held).toBe(true);
    // The release settles with a quorum; the last node's answer is background work.
    expect((await lock.release()).released).toBeGreaterThanOrEqual(2);
    await redlock.settled();
    for (const node of nodes) {
      expect(node.get(key)).toBeUndefined();
      expect(node.pttl(key)).toBe(-2);
    }
  });

  it("runs a routine under using(), the lock held throughout and released after", async () => {
    const nodes = cluster();
    const redlock = new Redlock({ nodes });
    const seen = await redlock.using(["a", "b"], 5_000, async (_signal, lock) =>
      nodes.map((node) => lock.keys.map((key) => node.get(key) === lock.token)),
    );
    expect(seen).toEqual([
      [true, true],
      [true, true],
      [true, true],
    ]);
    for (const node of nodes) expect(node.keys().filter((key) => key === "a" || key === "b")).toEqual([]);
  });

  it("refuses a second client while the first holds the lock, and lets it in line take it after the release", async () => {
    const nodes = cluster();
    expect(await exclusive(nodes)).toBe(true);
    const first = new Redlock({ nodes });
    const second = new Redlock({ nodes });
    const held = await first.acquire("contended", 10_000);
    await expect(second.acquire("contended", 10_000, { maxAttempts: 2 })).rejects.toBeInstanceOf(LockHeldError);
    const waiting = second.acquire("contended", 10_000, { acquireTimeoutMs: 30_000 });
    await held.release();
    const next = await waiting;
    expect(next.token).not.toBe(held.token);
    for (const node of nodes) expect(node.get("contended")).toBe(next.token);
    await next.release();
  });

  it("grants with 2 of 3 nodes while one is down, and reports the down node's error", async () => {
    const nodes = cluster();
    const down = nodes[0] as MemoryNode;
    down.down();
    const lock = await new Redlock({ nodes }).acquire("r", 5_000);
    const outcome = lock.acquireReport.nodes.find((n) => n.node === down.id);
    expect(outcome?.outcome).toBe("error");
    expect(outcome?.error).toBeInstanceOf(NodeError);
    expect(down.get("r")).toBeUndefined();
    expect(nodes.slice(1).map((node) => node.get("r"))).toEqual([lock.token, lock.token]);
    await lock.release();
  });

  it("fails with QuorumUnavailableError while 2 of 3 nodes are down, and grants once they are back", async () => {
    const nodes = cluster();
    const redlock = new Redlock({ nodes });
    nodes[0]?.down();
    nodes[1]?.down();
    expect(nodes.map((node) => node.isDown)).toEqual([true, true, false]);
    await expect(redlock.acquire("r", 5_000, { maxAttempts: 1 })).rejects.toBeInstanceOf(QuorumUnavailableError);
    await expect(redlock.tryAcquire("r", 5_000)).rejects.toBeInstanceOf(QuorumUnavailableError);
    nodes[0]?.up();
    nodes[1]?.up();
    const lock = await redlock.acquire("r", 5_000);
    expect(lock.acquireReport.nodes.filter((n) => n.outcome === "acquired").length).toBeGreaterThanOrEqual(2);
  });

  it("loses the lock on a restart, and runs the scripts again by EVAL after a NOSCRIPT", async () => {
    const nodes = cluster();
    const redlock = new Redlock({ nodes });
    const lock = await redlock.acquire(["x", "y"], 10_000);
    for (const node of nodes) node.restart();
    const verified = await lock.verify();
    expect(verified.held).toBe(false);
    // verify()'s script was refused (NOSCRIPT) and run again by EVAL, two requests a node.
    expect(verified.report.nodes.every((n) => n.requests === 2)).toBe(true);
    // The nodes have lost every script: the all-or-none script of a lock of several resources
    // goes as EVAL at once, one request a node (none for a gate node a poll took before).
    const again = await redlock.acquire(["x", "y"], 10_000);
    const acquired = again.acquireReport.nodes.filter((n) => n.outcome === "acquired");
    expect(acquired.length).toBeGreaterThanOrEqual(2);
    expect(acquired.some((n) => n.requests === 1)).toBe(true);
    expect(acquired.every((n) => n.requests <= 1)).toBe(true);
    // Every node, the slowest included, holds both keys again: only EVAL could have set them.
    await redlock.settled();
    for (const node of nodes) expect([node.get("x"), node.get("y")]).toEqual([again.token, again.token]);
  });

  it("hands out increasing fences, and runs the fenced-write guard on a memory node as the protected store", async () => {
    const nodes = cluster();
    const redlock = new Redlock({ nodes, fencing });
    await initializeFencing(redlock);
    const first = await redlock.acquire("invoice", 5_000);
    await first.release();
    const second = await redlock.acquire("invoice", 5_000);
    expect(BigInt(second.fence as string)).toBeGreaterThan(BigInt(first.fence as string));

    const store = memoryNode();
    const write = (lock: typeof first, value: string) =>
      store.command(
        ["EVAL", fencedWriteScript.source, 2, "guard", "record", lock.fence as string, lock.token, value],
        new AbortController().signal,
      );
    expect(await write(second, "by second")).toEqual([1, second.fence]);
    expect(await write(first, "by first, late")).toEqual([0, second.fence]);
    expect(store.get("record")).toBe("by second");
  });

  it("negative control: nodes that grant every SET NX let a second client in, and the check says so", async () => {
    expect(await exclusive(cluster().map(yesNode))).toBe(false);
  });
});

describe("TTLs on the node's clock", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("expires a lock's keys when fake time passes its TTL, and another client takes the lock", async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const nodes = cluster();
    const lock = await new Redlock({ nodes }).acquire("r", 1_000);
    expect(nodes.map((node) => node.pttl("r"))).toEqual([1_000, 1_000, 1_000]);
    vi.advanceTimersByTime(999);
    expect(nodes.map((node) => [node.get("r"), node.pttl("r")])).toEqual(Array(3).fill([lock.token, 1]));
    vi.advanceTimersByTime(1);
    expect(nodes.map((node) => [node.get("r"), node.pttl("r")])).toEqual(Array(3).fill([undefined, -2]));
    expect(nodes[0]?.keys()).not.toContain("r");
    const next = await new Redlock({ nodes }).tryAcquire("r", 1_000);
    expect(next?.token).toMatch(/./);
    expect(next?.token).not.toBe(lock.token);
  });

  it("counts on the clock it is given", async () => {
    let now = 0;
    const node = memoryNode({ clock: { now: () => now } });
    const send = (...args: (string | number)[]) => node.command(args, new AbortController().signal);
    expect(await send("SET", "k", "v", "NX", "PX", 100)).toBe("OK");
    now = 99;
    expect([node.get("k"), await send("PTTL", "k")]).toEqual(["v", 1]);
    now = 100;
    expect([node.get("k"), await send("GET", "k"), await send("SET", "k", "w", "NX", "PX", 100)]).toEqual([
      undefined,
      null,
      "OK",
    ]);
  });
});

describe("outages and latency", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("down(): every command fails as a refused connection; the data is kept for up()", async () => {
    const node = memoryNode({ id: "n1" });
    const signal = new AbortController().signal;
    await node.command(["SET", "k", "v", "PX", 60_000], signal);
    node.down();
    const error = await node.command(["GET", "k"], signal).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodeError);
    expect(error).toMatchObject({
      node: "n1",
      status: undefined,
      message: expect.stringMatching(/connection refused/),
    });
    node.up();
    expect(await node.command(["GET", "k"], signal)).toBe("v");
  });

  it("latencyMs: applies and answers a command after the latency; an abort before then cancels it unapplied", async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const node = memoryNode({ latencyMs: 50 });
    const controller = new AbortController();
    const cancelled = node.command(["SET", "k", "early", "NX", "PX", 1000], controller.signal);
    vi.advanceTimersByTime(20);
    controller.abort(new Error("gave up"));
    await expect(cancelled).rejects.toThrow("gave up");
    await vi.advanceTimersByTimeAsync(100);
    expect(node.get("k")).toBeUndefined();

    let answer: unknown;
    void node.command(["SET", "k", "late", "NX", "PX", 1000], new AbortController().signal).then((a) => (answer = a));
    await vi.advanceTimersByTimeAsync(49);
    expect([node.get("k"), answer]).toEqual([undefined, undefined]);
    await vi.advanceTimersByTimeAsync(1);
    expect([node.get("k"), answer]).toEqual(["late", "OK"]);
  });

  it("names nodes memory-1, memory-2, … unless given an id, and refuses bad options", () => {
    const [a, b] = memoryNodes(2);
    expect(a?.id).toMatch(/^memory-\d+$/);
    expect(Number(b?.id.slice(7))).toBe(Number(a?.id.slice(7)) + 1);
    expect(memoryNode({ id: "eu-1" }).id).toBe("eu-1");
    expect(() => memoryNode({ id: "" })).toThrow(InvalidArgumentError);
    expect(() => memoryNode({ latencyMs: -1 })).toThrow(InvalidArgumentError);
    expect(() => memoryNode({ latencyMs: Number.NaN })).toThrow(InvalidArgumentError);
    expect(() => memoryNode({ clock: {} as { now(): number } })).toThrow(InvalidArgumentError);
    expect(() => memoryNodes(0)).toThrow(InvalidArgumentError);
  });
});
