/**
 * The fenced write lock of a ReadWriteLock on memory nodes: the waiting writer's mark and the
 * cleanup of a failed attempt work as for a plain write lock; a fenced write costs what a fenced
 * mutex does (at most 2N requests, uncontended); a node that lost its data grants no write lock until it is
 * quarantined and repaired; read locks carry no fence; and the fencing value hands the primitives
 * exactly the attempt they expect (checked by the type checker and at run time).
 */
import { describe, expect, it } from "vitest";
import { attemptFencedWrite } from "../../../src/fencing/acquire.js";
import { fencing, initializeFencing } from "../../../src/fencing/index.js";
import { fencingKeys } from "../../../src/fencing/keys.js";
import { fenceRatchetScript } from "../../../src/fencing/scripts/fence-ratchet.js";
import { fenceRwWriteScript } from "../../../src/fencing/scripts/fence-rw-write.js";
import { LockHeldError, ReadWriteLock, type RedisArgument, Redlock } from "../../../src/index.js";
import { type FencedWrites, fencedWritesOf } from "../../../src/primitives/rw-attempts.js";
import { rwWriteScript } from "../../../src/primitives/scripts/rw-write.js";
import { type MemoryNode, memoryNodes } from "../../../src/testing/index.js";
import { counted, rwKeys, until } from "./support.js";

// The type checker holds the two layers to one contract, though neither imports the other.
const contract: FencedWrites["attemptWrite"] = attemptFencedWrite;

const fast = { retryBaseDelayMs: 5, retryMaxDelayMs: 20, maxAttempts: 1000 };

async function fencedNodes(count = 3): Promise<MemoryNode[]> {
  const nodes = memoryNodes(count);
  await initializeFencing(new Redlock({ nodes }));
  return nodes;
}

const docOf = (nodes: MemoryNode[], quarantineMs = 60_000) =>
  new ReadWriteLock(new Redlock({ nodes, fencing, quarantineMs }), "doc");

describe("the fenced write lock on memory nodes", () => {
  it("the fencing value carries the write lock's attempt; a plain client's options have none", () => {
    const o = new Redlock({ nodes: memoryNodes(3), fencing }).engine.resolve(undefined, 1000);
    expect(fencedWritesOf(o)?.attemptWrite).toBe(contract);
    expect(fencedWritesOf(new Redlock({ nodes: memoryNodes(3) }).engine.resolve(undefined, 1000))).toBeUndefined();
  });

  it("a waiting fenced writer's mark stops new readers; it gets in with the next fence and clears the mark", async () => {
    const nodes = await fencedNodes();
    const first = await docOf(nodes).acquireWrite(10_000);
    expect(first.fence).toBe("1");
    await first.release();
    const reader = await docOf(nodes).acquireRead(10_000);
    expect(reader.fence).toBeUndefined();
    const writing = docOf(nodes).acquireWrite(10_000, fast);
    const { mark } = rwKeys("doc");
    await until(() => nodes.every((node) => node.keys().includes(mark)));
    expect(await docOf(nodes).tryAcquireRead(10_000)).toBeNull();
    await reader.release();
    const writer = await writing;
    expect(writer.fence).toBe("2");
    for (const node of nodes) expect(node.keys()).not.toContain(mark);
    await writer.release();
  });

  it("a failed fenced attempt leaves no write key and, tried once, no mark; a writer that gives up clears its mark", async () => {
    const nodes = await fencedNodes();
    const { write, readers, mark } = rwKeys("doc");
    const signal = new AbortController().signal;
    // Readers on nodes 1 and 2 only: the write attempt gets node 0 and must undo it.
    for (const node of nodes.slice(1)) await node.command(["ZADD", readers, Date.now() + 60_000, "r"], signal);
    const redlock = new Redlock({ nodes, fencing });
    expect(await new ReadWriteLock(redlock, "doc").tryAcquireWrite(10_000)).toBeNull();
    await redlock.settled();
    for (const node of nodes) expect([node.get(write), node.keys().includes(mark)]).toEqual([undefined, false]);
    const error = await new ReadWriteLock(redlock, "doc")
      .acquireWrite(10_000, { ...fast, maxAttempts: 2 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    await redlock.settled();
    for (const node of nodes) expect([node.get(write), node.keys().includes(mark)]).toEqual([undefined, false]);
  });

  it("costs what a fenced mutex does: at most 2N requests uncontended, against N for a plain write lock", async () => {
    const nodes = await fencedNodes();
    const log: RedisArgument[][] = [];
    const seen = nodes.map((node) => counted(node, log));
    const sent = (sha: string) => log.filter((args) => args.includes(sha)).length;
    const fenced = await new ReadWriteLock(new Redlock({ nodes: seen, fencing }), "doc").acquireWrite(10_000);
    // Phase 1 on every node, the ratchet on those that granted phase 1 by its decision (a quorum at
    // least), against rw-write once per node for a plain write lock.
    expect([sent(fenceRwWriteScript.sha1), sent(rwWriteScript.sha1)]).toEqual([3, 0]);
    expect(sent(fenceRatchetScript.sha1)).toBeGreaterThanOrEqual(2);
    expect(sent(fenceRatchetScript.sha1)).toBeLessThanOrEqual(3);
    expect(fenced.fence).toBe("1");
    await fenced.release();
    log.length = 0;
    const plain = await new ReadWriteLock(new Redlock({ nodes: seen }), "doc").acquireWrite(10_000);
    expect([sent(fenceRwWriteScript.sha1), sent(fenceRatchetScript.sha1), sent(rwWriteScript.sha1)]).toEqual([0, 0, 3]);
    expect(plain.fence).toBeUndefined();
    await plain.release();
  });

  it("a node that lost its data grants no write lock until quarantined and repaired", async () => {
    const nodes = await fencedNodes();
    const before = await docOf(nodes, 200).acquireWrite(150);
    await before.release();
    nodes[0]?.restart();
    const keys = fencingKeys("");
    const doc = docOf(nodes, 200);
    const after = await doc.acquireWrite(150);
    expect(BigInt(after.fence as string)).toBeGreaterThan(BigInt(before.fence as string));
    expect(nodes[0]?.get(rwKeys("doc").write)).toBeUndefined();
    await after.release();
    await until(() => nodes[0]?.keys().includes(keys.quarantine) === true);
    // Quarantined and with node 2 down, no quorum: refused, and node 0 holds nothing.
    nodes[2]?.down();
    await expect(docOf(nodes, 200).tryAcquireWrite(150)).rejects.toThrow(/no quorum/);
    expect(nodes[0]?.get(rwKeys("doc").write)).toBeUndefined();
    nodes[2]?.up();
    await until(() => nodes[0]?.keys().includes(keys.quarantine) === false);
    // The next writer repairs node 0's counter of this lock; with node 2 down it then counts.
    const repairing = new Redlock({ nodes, fencing, quarantineMs: 200 });
    const third = await new ReadWriteLock(repairing, "doc").acquireWrite(150);
    await third.release();
    await repairing.settled();
    nodes[2]?.down();
    const fourth = await docOf(nodes, 200).acquireWrite(150);
    expect(BigInt(fourth.fence as string)).toBeGreaterThan(BigInt(third.fence as string));
    expect(nodes[0]?.get(rwKeys("doc").write)).toBe(fourth.token);
    await fourth.release();
  });
});
