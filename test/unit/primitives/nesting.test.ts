/**
 * A nested acquisition of a semaphore or read-write lock inside a `using()` routine that holds it
 * would wait for itself (a write lock for the routine's own lock, a reader behind a writer that
 * waits for the routine's read lock, a permit behind permits held by routines that each wait for
 * another): refused at once, as a mutex's is. A try does not wait and goes through; another
 * primitive, or the same name on other nodes, is not the routine's.
 */
import { describe, expect, it } from "vitest";
import { InvalidArgumentError, ReadWriteLock, Redlock, Semaphore } from "../../../src/index.js";
import { memoryNodes } from "../../../src/testing/index.js";

/** What a call settles with: its value, or the error it threw. */
const settle = (promise: Promise<unknown>) =>
  promise.then(
    (value) => value,
    (error: unknown) => error,
  );
/**
 * A call that does wait gives up within a second with another error (ACQUIRE_TIMEOUT, LOCK_HELD):
 * an InvalidArgumentError says it was refused, not waited out.
 */
const brief = { acquireTimeoutMs: 1000 };

describe("inside Semaphore.using()", () => {
  it("acquire() and using() of the same semaphore are refused at once, by any client of the same nodes", async () => {
    const nodes = memoryNodes(3);
    const upstream = new Semaphore(new Redlock({ nodes }), "upstream", 1);
    const sibling = new Semaphore(new Redlock({ nodes }), "upstream", 1);
    const inner = await upstream.using(5000, async () => ({
      acquire: await settle(upstream.acquire(1000, brief)),
      using: await settle(upstream.using(1000, async () => "ran", brief)),
      sibling: await settle(sibling.acquire(1000, brief)),
    }));
    for (const refused of Object.values(inner)) {
      expect(refused).toBeInstanceOf(InvalidArgumentError);
      expect((refused as Error).message).toMatch(/would wait for itself/);
    }
  });

  it("a try, another semaphore, and the same name on other nodes go through; after the routine, acquire() does", async () => {
    const nodes = memoryNodes(3);
    const redlock = new Redlock({ nodes });
    const upstream = new Semaphore(redlock, "upstream", 2);
    const elsewhere = new Semaphore(new Redlock({ nodes: memoryNodes(3) }), "upstream", 1);
    const taken = await upstream.using(5000, async () => {
      const tried = await upstream.tryAcquire(1000);
      const other = await new Semaphore(redlock, "other", 1).acquire(1000);
      const far = await elsewhere.acquire(1000);
      for (const lock of [tried, other, far]) await lock?.release();
      return [tried, other, far].filter((lock) => lock !== null).length;
    });
    expect(taken).toBe(3);
    const after = await upstream.acquire(1000);
    expect(after.remainingMs()).toBeGreaterThan(0);
    await after.release();
  });
});

describe("inside ReadWriteLock.usingRead() and usingWrite()", () => {
  it("every waiting acquisition of the same lock is refused at once, read or write", async () => {
    const nodes = memoryNodes(3);
    const doc = new ReadWriteLock(new Redlock({ nodes }), "doc:42");
    const calls = () => ({
      acquireRead: settle(doc.acquireRead(1000, brief)),
      acquireWrite: settle(doc.acquireWrite(1000, brief)),
      usingRead: settle(doc.usingRead(1000, async () => "ran", brief)),
      usingWrite: settle(doc.usingWrite(1000, async () => "ran", brief)),
    });
    const underRead = await doc.usingRead(5000, async () => Object.values(calls()));
    const underWrite = await doc.usingWrite(5000, async () => Object.values(calls()));
    for (const refused of await Promise.all([...underRead, ...underWrite])) {
      expect(refused).toBeInstanceOf(InvalidArgumentError);
      expect((refused as Error).message).toMatch(/would wait for itself/);
    }
  });

  it("tries go through (a reader joins the routine's read lock, a writer is told null), and another lock is not the routine's", async () => {
    const nodes = memoryNodes(3);
    const redlock = new Redlock({ nodes });
    const doc = new ReadWriteLock(redlock, "doc:42");
    const seen = await doc.usingRead(5000, async () => {
      const reader = await doc.tryAcquireRead(1000);
      const writer = await doc.tryAcquireWrite(1000);
      const other = await new ReadWriteLock(redlock, "doc:43").acquireWrite(1000);
      await reader?.release();
      await other.release();
      return { reader: reader !== null, writer };
    });
    expect(seen).toEqual({ reader: true, writer: null });
    const after = await doc.acquireWrite(1000);
    await after.release();
  });
});
