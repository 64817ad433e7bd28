/**
 * The read-write lock on memory nodes: readers share, a writer excludes readers and writers (on
 * the clients' side and on the nodes' own keys), a waiting writer stops new readers, reader entries
 * expire by the node's clock, and each lock's extend, verify and release touch its own token only.
 * Negative controls: a read lock that ignores the writer is caught by the same checks.
 */
import { describe, expect, it } from "vitest";
import { fencing } from "../../../src/fencing/index.js";
import {
  InvalidArgumentError,
  type Lock,
  LockHeldError,
  ReadWriteLock,
  Redlock,
  Semaphore,
} from "../../../src/index.js";
import { type MemoryNode, memoryNode, memoryNodes } from "../../../src/testing/index.js";
import {
  checkPermits,
  checkReadWrite,
  type ModeWindow,
  readWriteConflicts,
  type Window,
} from "../../../tools/chaos/checkers/primitives.js";
import { rwKeys, rwState, sleep, until } from "./support.js";

const signal = () => new AbortController().signal;
const lockOf = (nodes: MemoryNode[], name = "doc") => new ReadWriteLock(new Redlock({ nodes }), name);

async function conflicts(nodes: MemoryNode[], name = "doc"): Promise<string[]> {
  const states = await Promise.all(nodes.map((node) => rwState(node, name, Date.now())));
  return readWriteConflicts(states, 2);
}

describe("readers share, a writer is alone", () => {
  it("many readers at once; no writer beside them; a writer excludes readers and writers", async () => {
    const nodes = memoryNodes(3);
    const readers = await Promise.all([1, 2, 3].map(() => lockOf(nodes).acquireRead(10_000)));
    expect(new Set(readers.map((r) => r.token)).size).toBe(3);
    expect(await lockOf(nodes).tryAcquireWrite(10_000)).toBeNull();
    for (const node of nodes) expect((await rwState(node, "doc", Date.now())).readers.size).toBe(3);
    await Promise.all(readers.map((r) => r.release()));
    const writer = await lockOf(nodes).acquireWrite(10_000);
    expect(await lockOf(nodes).tryAcquireRead(10_000)).toBeNull();
    expect(await lockOf(nodes).tryAcquireWrite(10_000)).toBeNull();
    expect(await conflicts(nodes)).toEqual([]);
    await writer.release();
    const again = await lockOf(nodes).tryAcquireRead(10_000);
    expect(again).not.toBeNull();
  });

  it("under contention, with reads and writes from many clients: no write window overlaps another window", async () => {
    const nodes = memoryNodes(3, { latencyMs: 1 });
    const windows: ModeWindow[] = [];
    let id = 0;
    const client = async (mode: "read" | "write") => {
      const doc = lockOf(nodes, "contended");
      const options = { retryBaseDelayMs: 5, retryMaxDelayMs: 20, maxAttempts: 1000, requestBudget: 10_000 };
      const run = mode === "read" ? doc.usingRead.bind(doc) : doc.usingWrite.bind(doc);
      await run(
        2_000,
        async (_signal, lock) => {
          const start = performance.now();
          await sleep(3 + (id % 4));
          windows.push({
            holder: `${mode}-${++id}`,
            mode,
            start,
            end: Math.min(performance.now(), start + lock.remainingMs()),
          });
        },
        options,
      );
    };
    const modes = Array.from({ length: 24 }, (_, i): "read" | "write" => (i % 3 === 0 ? "write" : "read"));
    await Promise.all(modes.map(client));
    expect(windows).toHaveLength(24);
    expect(checkReadWrite(windows)).toEqual([]);
    // Readers did share: some read windows overlap.
    expect(
      checkPermits(
        windows.filter((w) => w.mode === "read"),
        1,
      ).mostAtOnce,
    ).toBeGreaterThan(1);
  });

  it("negative control: a read lock that ignores the writer is caught by the window check and on the nodes", async () => {
    const nodes = memoryNodes(3);
    const writer = await lockOf(nodes).acquireWrite(10_000);
    const start = performance.now();
    // The broken read lock: a reader entry on every node, whatever the write key says.
    for (const node of nodes) {
      expect(await node.command(["ZADD", rwKeys("doc").readers, Date.now() + 10_000, "ignorant"], signal())).toBe(1);
    }
    const windows: ModeWindow[] = [
      { holder: "writer", mode: "write", start, end: start + writer.remainingMs() },
      { holder: "ignorant", mode: "read", start, end: start + 10_000 },
    ];
    expect(checkReadWrite(windows)).toHaveLength(1);
    expect((await conflicts(nodes)).sort()).toEqual(["ignorant", writer.token].sort());
  });
});

describe("writers do not starve", () => {
  it("a waiting writer's mark stops new readers; the readers in go on, then the writer gets in and clears it", async () => {
    const nodes = memoryNodes(3);
    const redlock = new Redlock({ nodes });
    const reader = await new ReadWriteLock(redlock, "doc").acquireRead(10_000);
    const writing = lockOf(nodes).acquireWrite(10_000, {
      retryBaseDelayMs: 10,
      retryMaxDelayMs: 20,
      maxAttempts: 1000,
    });
    const { mark } = rwKeys("doc");
    await until(() => nodes.every((node) => node.keys().includes(mark)));
    expect(await lockOf(nodes).tryAcquireRead(10_000)).toBeNull();
    await reader.extend(10_000);
    await reader.release();
    const writer = await writing;
    for (const node of nodes) expect(node.keys()).not.toContain(mark);
    expect(await lockOf(nodes).tryAcquireRead(10_000)).toBeNull();
    await writer.release();
    await redlock.settled();
    expect(await lockOf(nodes).tryAcquireRead(10_000)).not.toBeNull();
  });

  it("control: a single try of a writer leaves no mark, and a new reader joins", async () => {
    const nodes = memoryNodes(3);
    const reader = await lockOf(nodes).acquireRead(10_000);
    expect(await lockOf(nodes).tryAcquireWrite(10_000)).toBeNull();
    for (const node of nodes) expect(node.keys()).not.toContain(rwKeys("doc").mark);
    expect(await lockOf(nodes).tryAcquireRead(10_000)).not.toBeNull();
    await reader.release();
  });

  it("a writer that gives up clears its mark", async () => {
    const nodes = memoryNodes(3);
    const redlock = new Redlock({ nodes });
    await lockOf(nodes).acquireRead(10_000);
    const error = await new ReadWriteLock(redlock, "doc")
      .acquireWrite(10_000, { maxAttempts: 2, retryBaseDelayMs: 5, retryMaxDelayMs: 10 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    await redlock.settled();
    for (const node of nodes) expect(node.keys()).not.toContain(rwKeys("doc").mark);
  });
});

describe("reader entries expire by the node's own clock", () => {
  it("an entry past its TTL on the node's clock no longer holds, verifies or extends, whatever the client's clock says", async () => {
    let skew = 0;
    const clock = { now: () => Date.now() + skew };
    const nodes = [memoryNode({ clock }), memoryNode({ clock }), memoryNode({ clock })];
    const short = await lockOf(nodes).acquireRead(2_000);
    const long = await lockOf(nodes).acquireRead(60_000);
    // The nodes' clocks run 2.1 s ahead; the client's does not move.
    skew = 2_100;
    expect(short.remainingMs()).toBeGreaterThan(1_000);
    expect((await short.verify()).held).toBe(false);
    await expect(short.extend(10_000)).rejects.toMatchObject({ code: "EXTEND_FAILED" });
    for (const node of nodes) expect([...(await rwState(node, "doc", clock.now())).readers]).toEqual([long.token]);
    // The long reader still holds: no writer yet; once it is gone, one gets in.
    expect(await lockOf(nodes).tryAcquireWrite(10_000)).toBeNull();
    await long.release();
    expect(await lockOf(nodes).tryAcquireWrite(10_000)).not.toBeNull();
  });
});

describe("each lock its own token", () => {
  it("extending or releasing one reader leaves the others; a writer extends its own key", async () => {
    const nodes = memoryNodes(3);
    const redlock = new Redlock({ nodes });
    const doc = new ReadWriteLock(redlock, "doc");
    const first = await doc.acquireRead(5_000);
    const second = await doc.acquireRead(5_000);
    const { readers, write } = rwKeys("doc");
    const score = (node: MemoryNode, lock: Lock) => node.command(["ZSCORE", readers, lock.token], signal());
    const before = await Promise.all(nodes.map((node) => score(node, second)));
    await first.extend(30_000);
    for (const node of nodes) {
      expect(Number(await score(node, first)) - Date.now()).toBeGreaterThan(25_000);
      expect(node.pttl(readers)).toBeGreaterThan(25_000);
    }
    expect(await Promise.all(nodes.map((node) => score(node, second)))).toEqual(before);
    expect((await first.verify()).remainingMs).toBeGreaterThan(25_000);
    await first.release();
    await redlock.settled();
    for (const node of nodes) expect(await score(node, first)).toBeNull();
    expect(await Promise.all(nodes.map((node) => score(node, second)))).toEqual(before);
    await second.release();
    const writer = await doc.acquireWrite(5_000);
    await writer.extend(30_000);
    for (const node of nodes) expect(node.pttl(write)).toBeGreaterThan(25_000);
    expect((await writer.verify()).held).toBe(true);
  });

  it("a failed attempt leaves no entry behind", async () => {
    const nodes = memoryNodes(3);
    const redlock = new Redlock({ nodes });
    const { write, readers } = rwKeys("doc");
    // A writer holds nodes 1 and 2 only: a read attempt gets node 0 and must undo it.
    for (const node of nodes.slice(1)) await node.command(["SET", write, "foreign", "PX", 60_000], signal());
    expect(await new ReadWriteLock(redlock, "doc").tryAcquireRead(10_000)).toBeNull();
    await redlock.settled();
    expect(await nodes[0]?.command(["ZCARD", readers], signal())).toBe(0);
    // Readers on nodes 1 and 2 only: a write attempt gets node 0 and must undo it.
    for (const node of nodes) await node.command(["DEL", write], signal());
    for (const node of nodes.slice(1)) await node.command(["ZADD", readers, Date.now() + 60_000, "r"], signal());
    expect(await new ReadWriteLock(redlock, "doc").tryAcquireWrite(10_000)).toBeNull();
    await redlock.settled();
    expect(nodes[0]?.get(write)).toBeUndefined();
  });
});

describe("input", () => {
  it("refuses a bad client or name, options of another call, and a fencing value that cannot fence a write lock", async () => {
    const nodes = memoryNodes(3);
    expect(() => new ReadWriteLock({} as Redlock, "doc")).toThrow(InvalidArgumentError);
    expect(() => new ReadWriteLock(new Redlock({ nodes }), "")).toThrow(InvalidArgumentError);
    const doc = lockOf(nodes);
    await expect(doc.acquireRead(10_000, { waitUntil: () => undefined } as never)).rejects.toThrow(/waitUntil/);
    // A value of the right kind without the write lock's attempt (not edge-redlock/fencing's): refused, nothing sent.
    const { attemptWrite: _, ...mutexOnly } = fencing as typeof fencing & { attemptWrite: unknown };
    const refused = new ReadWriteLock(new Redlock({ nodes, fencing: mutexOnly }), "doc");
    await expect(refused.acquireWrite(10_000)).rejects.toThrow(/cannot fence a write lock/);
    for (const node of nodes) expect(node.keys().filter((k) => k.includes(":rw:"))).toEqual([]);
  });

  it("usingRead and usingWrite hand the release to waitUntil, as Redlock.using() does", async () => {
    const nodes = memoryNodes(3);
    const doc = lockOf(nodes);
    const handed: Promise<unknown>[] = [];
    const waitUntil = (promise: Promise<unknown>) => void handed.push(promise);
    expect(await doc.usingRead(10_000, async () => "read", { waitUntil })).toBe("read");
    expect(await doc.usingWrite(10_000, async () => "written", { waitUntil })).toBe("written");
    await Promise.all(handed);
    expect(handed).toHaveLength(2);
    for (const node of nodes) expect(node.keys().filter((k) => k.includes(":rw:"))).toEqual([]);
  });

  it("a read-write lock, a semaphore and a mutex of one name are three things", async () => {
    const nodes = memoryNodes(3);
    const redlock = new Redlock({ nodes });
    const writer = await new ReadWriteLock(redlock, "same").acquireWrite(10_000);
    const permit = await new Semaphore(redlock, "same", 1).acquire(10_000);
    const mutex = await redlock.acquire("same", 10_000);
    expect(new Set([writer.keys[0], permit.keys[0], mutex.keys[0]]).size).toBe(3);
  });
});

describe("the window checkers", () => {
  it("count windows open at once; ends that meet do not overlap", () => {
    const windows: Window[] = [
      { holder: "a", start: 0, end: 10 },
      { holder: "b", start: 10, end: 20 },
      { holder: "c", start: 5, end: 15 },
    ];
    expect(checkPermits(windows, 2)).toMatchObject({ mostAtOnce: 2, anomaly: undefined });
    expect(
      [...(checkPermits([...windows, { holder: "d", start: 12, end: 13 }], 2).anomaly?.holders ?? [])].sort(),
    ).toEqual(["b", "c", "d"]);
    expect(
      checkReadWrite([
        { holder: "r1", mode: "read", start: 0, end: 10 },
        { holder: "r2", mode: "read", start: 5, end: 15 },
        { holder: "w", mode: "write", start: 15, end: 20 },
      ]),
    ).toEqual([]);
  });
});

describe("misuse: a lock released twice, late, or by another client of other nodes with the same ids", () => {
  it("a second release of a write lock sends nothing, and the next writer keeps its keys", async () => {
    const nodes = memoryNodes(3);
    const first = await lockOf(nodes).acquireWrite(10_000);
    await first.release();
    const next = await lockOf(nodes).acquireWrite(10_000);
    const writes = nodes.map((n) => n.get(rwKeys("doc").write));
    await first.release();
    expect(nodes.map((n) => n.get(rwKeys("doc").write))).toEqual(writes);
    expect(writes.every((token) => token === next.token)).toBe(true);
    await next.release();
  });

  it("a client of other nodes with the same ids holds its own lock, untouched by the first client's", async () => {
    const here = memoryNodes(3);
    const there = [memoryNode({ id: here[0]!.id }), memoryNode({ id: here[1]!.id }), memoryNode({ id: here[2]!.id })];
    const mine = await lockOf(here, "a:b\nc").acquireWrite(10_000);
    const theirs = await lockOf(there, "a:b\nc").acquireWrite(10_000);
    await mine.release();
    expect(there.every((n) => n.get(rwKeys("a:b\nc").write) === theirs.token)).toBe(true);
    await theirs.release();
  });
});
