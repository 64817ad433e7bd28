/**
 * The fenced write lock of a ReadWriteLock against real nodes (a client with the `fencing` option):
 * - every write lock carries `lock.fence`; writers in turn, of any client, get strictly increasing
 *   fences; read locks carry none and still share; extension keeps the fence and is bounded by
 *   the quarantine, as a fenced mutex's;
 * - one sequence per read-write lock: a fenced mutex of the same name counts apart, on the nodes'
 *   own counters too, and neither moves the other;
 * - under contention from many clients, the fences sorted by grant order strictly increase
 *   (negative control: the same check catches two fences swapped), and no write window overlaps
 *   another window;
 * - an uninitialised deployment refuses fenced write locks and keeps nothing; a node restarted
 *   empty is quarantined by the next writer, grants no write lock while quarantined, is repaired
 *   (for this lock's counter only: a mutex's counter still needs its own repair, as for a mutex),
 *   and counts again afterwards, the fence increasing throughout; a read lock, as documented, is
 *   the plain one, which the quarantined node admits.
 * Own cluster: the last test restarts a node.
 */
import { describe, expect, it } from "vitest";
import { FencingError, InvalidArgumentError, QuorumUnavailableError } from "../../src/base/errors.js";
import { fencing, initializeFencing } from "../../src/fencing/index.js";
import { fencingKeys } from "../../src/fencing/keys.js";
import { fenceReadScript } from "../../src/fencing/scripts/fence-read.js";
import { type Lock, ReadWriteLock, Redlock } from "../../src/index.js";
import { primitiveKey } from "../../src/primitives/calls.js";
import { checkReadWrite, type ModeWindow } from "../../tools/chaos/checkers/primitives.js";
import { fenceOrderViolations, type OrderedGrant, sleep } from "./support/fencing.js";
import { type Endpoint, raw, uniqueKey } from "./support/nodes.js";
import { useOwnThreeNodes } from "./support/own-cluster.js";

const { nodesOf, endpoints } = useOwnThreeNodes();

const TTL_MS = 1000;
const QUARANTINE_MS = 1500;
const waitFor = { retryBaseDelayMs: 10, retryMaxDelayMs: 40, maxAttempts: 1000, requestBudget: 20_000 };

/** A fenced client of nodes 0 to 2 in the namespace `prefix`. */
function client(prefix: string): Redlock {
  return new Redlock({ nodes: endpoints, keyPrefix: prefix, fencing, quarantineMs: QUARANTINE_MS });
}

/** The counter field of the read-write lock `name`: its write key without the prefix. */
const writeField = (name: string) => primitiveKey("", "rw", name, "write");

/** Each node's counter of `field` in the namespace `prefix` (0 when absent). */
async function counters(prefix: string, field: string): Promise<number[]> {
  const hash = fencingKeys(prefix).counters;
  return Promise.all(endpoints.map(async (e) => Number((await raw(e, "HGET", hash, field)) ?? 0)));
}

/** Node i's own view of its health for `field` in the namespace `prefix` (the fence-read script). */
async function health(i: number, prefix: string, field: string): Promise<string> {
  const keys = fencingKeys(prefix);
  const reply = await raw(endpoints[i] as Endpoint, "EVAL", fenceReadScript.source, 4, ...Object.values(keys), field);
  return (reply as string[])[0] as string;
}

describe("a fenced write lock on real nodes", () => {
  it("carries a fence that increases from writer to writer; readers carry none; extension as a mutex's", async () => {
    const prefix = `${uniqueKey("rwf")}:`;
    const name = "doc:42";
    const doc = () => new ReadWriteLock(client(prefix), name);
    expect((await initializeFencing(client(prefix))).initialized).toBe(3);

    const fences: bigint[] = [];
    for (let i = 0; i < 4; i++) {
      const writer = await doc().acquireWrite(TTL_MS);
      expect(writer.fence).toMatch(/^[1-9][0-9]*$/);
      fences.push(BigInt(writer.fence as string));
      await writer.release();
    }
    expect(fences).toEqual([1n, 2n, 3n, 4n]);
    // The last fence is on a quorum of the nodes' own counters, under the write lock's field.
    expect((await counters(prefix, writeField(name))).filter((c) => c >= 4).length).toBeGreaterThanOrEqual(2);

    const readers = await Promise.all([doc().acquireRead(TTL_MS), doc().acquireRead(TTL_MS)]);
    expect(readers.map((r) => r.fence)).toEqual([undefined, undefined]);
    expect(await doc().tryAcquireWrite(TTL_MS)).toBeNull();
    await Promise.all(readers.map((r) => r.release()));

    const writer = await doc().acquireWrite(TTL_MS);
    expect(writer.fence).toBe("5");
    await writer.extend(TTL_MS);
    expect(writer.fence).toBe("5");
    // An extension past what the quarantine covers is refused, as a fenced mutex's is.
    await expect(writer.extend(QUARANTINE_MS)).rejects.toThrow(InvalidArgumentError);
    await writer.release();
    await expect(doc().acquireWrite(QUARANTINE_MS)).rejects.toThrow(InvalidArgumentError);
  });

  it("a fenced mutex of the same name keeps a sequence of its own, on the nodes too", async () => {
    const prefix = `${uniqueKey("rwf-mutex")}:`;
    const name = "invoice";
    const redlock = client(prefix);
    await initializeFencing(redlock);
    const rw = new ReadWriteLock(redlock, name);
    const writes: string[] = [];
    const mutexes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const w = await rw.acquireWrite(TTL_MS);
      writes.push(w.fence as string);
      // Not exclusive of each other: a mutex and a write lock of one name are two locks.
      const m = await redlock.acquire(name, TTL_MS);
      mutexes.push(m.fence as string);
      await Promise.all([w.release(), m.release()]);
    }
    expect(writes).toEqual(["1", "2", "3"]);
    expect(mutexes).toEqual(["1", "2", "3"]);
    expect((await counters(prefix, name)).filter((c) => c === 3).length).toBeGreaterThanOrEqual(2);
    expect((await counters(prefix, writeField(name))).filter((c) => c === 3).length).toBeGreaterThanOrEqual(2);
  });

  it("many clients writing and reading at once: fences increase in grant order, no write beside anyone", async () => {
    const prefix = `${uniqueKey("rwf-contended")}:`;
    const name = "contended";
    await initializeFencing(client(prefix));
    const grants: OrderedGrant[] = [];
    const windows: ModeWindow[] = [];
    let order = 0;
    const worker = async (c: number) => {
      const doc = new ReadWriteLock(client(prefix), name);
      for (let i = 0; i < 4; i++) {
        const mode = (c + i) % 2 === 0 ? "write" : "read";
        const routine = async (_signal: AbortSignal, lock: Lock) => {
          const start = performance.now();
          const claimedEnd = start + lock.remainingMs();
          // The grant order: a counter bumped under the lock (exclusive for writers only).
          if (mode === "write") grants.push({ order: ++order, fence: lock.fence as string });
          else expect(lock.fence).toBeUndefined();
          await sleep(10);
          windows.push({ holder: `${c}-${i}`, mode, start, end: Math.min(performance.now(), claimedEnd) });
        };
        if (mode === "read") await doc.usingRead(TTL_MS, routine, waitFor);
        else await doc.usingWrite(TTL_MS, routine, waitFor);
      }
    };
    await Promise.all([0, 1, 2, 3, 4, 5].map(worker));
    expect(grants).toHaveLength(12);
    expect(windows).toHaveLength(24);
    expect(fenceOrderViolations(grants)).toEqual([]);
    expect(checkReadWrite(windows)).toEqual([]);
    // Negative control: the same history with two fences swapped is caught.
    const swapped = grants.map((g) => ({ ...g }));
    [swapped[3], swapped[7]] = [
      { order: 4, fence: (swapped[7] as OrderedGrant).fence },
      { order: 8, fence: (swapped[3] as OrderedGrant).fence },
    ];
    expect(fenceOrderViolations(swapped).length).toBeGreaterThan(0);
  });

  it("refused until initialised; a restarted node is quarantined, repaired for this lock, then counts again", async () => {
    const prefix = `${uniqueKey("rwf-restart")}:`;
    const name = "restart";
    const field = writeField(name);
    const writeKey = prefix + field;
    const doc = () => new ReadWriteLock(client(prefix), name);

    // A brand-new deployment: refused, and the attempt leaves no write key behind.
    const refused = await doc()
      .acquireWrite(TTL_MS)
      .catch((e) => e);
    expect(refused).toBeInstanceOf(FencingError);
    expect(refused.code).toBe("FENCING_UNINITIALIZED");
    await sleep(100);
    for (const e of endpoints) expect(await raw(e, "EXISTS", writeKey)).toBe(0);

    await initializeFencing(client(prefix));
    const redlock = client(prefix);
    const mutex = await redlock.acquire(name, TTL_MS);
    await mutex.release();
    const first = await doc().acquireWrite(TTL_MS);
    expect(first.fence).toBe("1");
    await first.release();

    // Node 0 restarts empty. The next writer gets in on nodes 1 and 2 and quarantines node 0.
    await nodesOf().restart(0);
    const writer = client(prefix);
    const second = await new ReadWriteLock(writer, name).acquireWrite(TTL_MS);
    expect(BigInt(second.fence as string)).toBeGreaterThan(1n);
    expect(await raw(endpoints[0] as Endpoint, "EXISTS", writeKey)).toBe(0);
    await second.release();
    await writer.settled();
    expect(await health(0, prefix, field)).toBe("QUARANTINED");

    // Quarantined, node 0 grants no write lock: with node 2 paused, there is no quorum.
    nodesOf().pause(2);
    try {
      const blocked = await doc()
        .tryAcquireWrite(TTL_MS, { requestTimeoutMs: 300 })
        .catch((e) => e);
      expect(blocked).toBeInstanceOf(QuorumUnavailableError);
      expect(await raw(endpoints[0] as Endpoint, "EXISTS", writeKey)).toBe(0);
      // As documented, a read lock is the plain one: the quarantined node admits it, without a fence.
      for (let i = 0; i < 100 && (await raw(endpoints[1] as Endpoint, "EXISTS", writeKey)) === 1; i++) await sleep(20);
      const reader = await doc().acquireRead(TTL_MS, { requestTimeoutMs: 300 });
      expect(reader.fence).toBeUndefined();
      expect(
        await raw(endpoints[0] as Endpoint, "ZSCORE", prefix + primitiveKey("", "rw", name, "readers"), reader.token),
      ).not.toBeNull();
      await reader.release();
    } finally {
      nodesOf().resume(2);
    }

    // After the quarantine node 0 needs repair; the next writer's maintenance repairs this lock's
    // counter from a quorum. The mutex of the same name has a counter of its own, still unrepaired.
    for (let i = 0; i < 100 && (await health(0, prefix, field)) === "QUARANTINED"; i++) await sleep(50);
    expect(await health(0, prefix, field)).toBe("NEEDS_REPAIR");
    const repairing = client(prefix);
    const third = await new ReadWriteLock(repairing, name).acquireWrite(TTL_MS);
    expect(BigInt(third.fence as string)).toBeGreaterThan(BigInt(second.fence as string));
    await third.release();
    await repairing.settled();
    expect(await health(0, prefix, field)).toBe("OK");
    expect((await counters(prefix, field))[0]).toBeGreaterThanOrEqual(Number(third.fence));
    expect(await health(0, prefix, name)).toBe("NEEDS_REPAIR");

    // Repaired, node 0 counts again: with node 2 paused the write lock is granted on nodes 0 and 1.
    nodesOf().pause(2);
    try {
      const fourth = await doc().acquireWrite(TTL_MS, { requestTimeoutMs: 300 });
      expect(BigInt(fourth.fence as string)).toBeGreaterThan(BigInt(third.fence as string));
      expect(await raw(endpoints[0] as Endpoint, "GET", writeKey)).toBe(fourth.token);
      await fourth.release();
    } finally {
      nodesOf().resume(2);
    }
  }, 60_000);
});
