/**
 * Waiting for a semaphore's permits, on memory nodes: waiters that arrive one by one while every
 * permit is held are granted in arrival order (separate clients, each counting its own requests),
 * each call within its request budget with its release; a waiter that dies does not hold up the
 * line past its lease; with the line's gate down, waiters are still granted (by backoff) and never
 * more than k hold at once. Negative control: the same schedule with the line unreachable (today's
 * backoff waiting) does not grant in arrival order, and the order check says so.
 */
import { describe, expect, it } from "vitest";
import { NodeError } from "../../../src/base/errors.js";
import { type Lock, type RedisArgument, type RedisNode, Redlock, Semaphore } from "../../../src/index.js";
import { semaphoreLineScript } from "../../../src/primitives/scripts/semaphore-line.js";
import { aimedPause, lineGate, lineKeys, pollGap, slotByRank } from "../../../src/primitives/semaphore-line.js";
import { type MemoryNode, memoryNodes } from "../../../src/testing/index.js";
import { checkPermits, type Window } from "../../../tools/chaos/checkers/primitives.js";
import { counted, kinds, sleep, until } from "./support.js";

/** Where grants left arrival order: the first place whose waiter is not the next to arrive, or -1. */
function outOfOrder(grants: readonly number[]): number {
  return grants.findIndex((waiter, place) => waiter !== place);
}

/** A node whose polls of a semaphore's line fail, as if the gate were down for them (everything else passes). */
function lineRefused(node: RedisNode): RedisNode {
  return {
    id: node.id,
    command(args, signal) {
      if (args[1] === semaphoreLineScript.sha1 || args[1] === semaphoreLineScript.source) {
        return Promise.reject(new NodeError(node.id, "connection refused"));
      }
      return node.command(args, signal);
    },
  };
}

/** A node a waiter reaches until `kill()`: from then on every request of its fails at once (the waiter died). */
function killable(node: RedisNode): RedisNode & { kill(): void } {
  let dead = false;
  return {
    id: node.id,
    kill() {
      dead = true;
    },
    command(args, signal) {
      return dead ? Promise.reject(new NodeError(node.id, "gone")) : node.command(args, signal);
    },
  };
}

/**
 * k permits held by holders; `waiters` clients (each its own Redlock, counting its own requests)
 * arrive one by one, each after the one before is waiting; then the permits free one at a time,
 * each the next grant's to release. Returns the waiters in the order they were granted, and each
 * waiter's requests (its release included).
 */
async function arrivalSchedule(
  nodes: MemoryNode[],
  name: string,
  options: { k: number; waiters: number; view?: (node: RedisNode) => RedisNode; retry?: object },
) {
  const { k, waiters } = options;
  const held: Lock[] = [];
  for (let i = 0; i < k; i++) held.push(await new Semaphore(new Redlock({ nodes }), name, k).acquire(30_000));
  const logs = Array.from({ length: waiters }, () => [] as RedisArgument[][]);
  const granted: number[] = [];
  const permits = new Map<number, Lock>();
  const calls: Promise<void>[] = [];
  for (let w = 0; w < waiters; w++) {
    const view = nodes.map((node) => counted(options.view ? options.view(node) : node, logs[w] as RedisArgument[][]));
    const semaphore = new Semaphore(new Redlock({ nodes: view }), name, k);
    calls.push(
      semaphore.acquire(30_000, { maxAttempts: 1000, acquireTimeoutMs: 20_000, ...options.retry }).then((permit) => {
        granted.push(w);
        permits.set(w, permit);
      }),
    );
    // The next arrives once this one has tried and waits (in line, or backing off).
    await until(() => (logs[w] as RedisArgument[][]).length >= 4, 5000);
    await sleep(50);
  }
  for (let step = 0; step < waiters; step++) {
    const next = held.shift() as Lock;
    await next.release();
    await until(() => granted.length > step, 15_000);
    held.push(permits.get(granted[step] as number) as Lock);
  }
  await Promise.all(calls);
  await Promise.all(held.map((permit) => permit.release()));
  return { granted, logs };
}

describe("first come, first served", () => {
  it("waiters arriving one by one while every permit is held are granted in arrival order, each within its budget", async () => {
    const nodes = memoryNodes(3);
    const { granted, logs } = await arrivalSchedule(nodes, "fcfs", { k: 2, waiters: 6 });
    expect(granted).toHaveLength(6);
    expect(outOfOrder(granted), `granted in the order ${granted.join(", ")}`).toBe(-1);
    for (const log of logs) {
      // The default requestBudget (40), the release and leaving the line included.
      expect(log.length).toBeLessThanOrEqual(40);
      expect(kinds(log).polls).toBeGreaterThanOrEqual(1);
    }
  });

  it("negative control: the same schedule waiting by backoff (the line refused) breaks arrival order, and the check says so", async () => {
    const nodes = memoryNodes(3);
    // Late arrivals back off less than early ones: they take the permits that free up first.
    const { granted } = await arrivalSchedule(nodes, "backoff", {
      k: 2,
      waiters: 6,
      view: lineRefused,
      retry: { retryBaseDelayMs: 20, retryMaxDelayMs: 2000 },
    });
    expect(granted).toHaveLength(6);
    expect(outOfOrder(granted), `granted in the order ${granted.join(", ")}`).toBeGreaterThanOrEqual(0);
  });

  it("a waiter that dies (never polls again) holds up the line only until its lease runs out", async () => {
    const nodes = memoryNodes(3);
    const name = "dead";
    const holder = await new Semaphore(new Redlock({ nodes }), name, 1).acquire(30_000);
    const deadView = nodes.map(killable);
    const controller = new AbortController();
    const dying = new Semaphore(new Redlock({ nodes: deadView, requestTimeoutMs: 200 }), name, 1)
      .acquire(30_000, { signal: controller.signal, maxAttempts: 1000 })
      .catch((error: unknown) => error);
    const [lineKey] = lineKeys("", name);
    const gate = nodes[lineGate(lineKey, 3)] as MemoryNode;
    const lineLength = async () => gate.command(["ZCARD", lineKey], new AbortController().signal);
    for (let i = 0; i < 100 && (await lineLength()) !== 1; i++) await sleep(20);
    expect(await lineLength()).toBe(1);
    const behindClient = new Redlock({ nodes, requestTimeoutMs: 200 });
    const behind = new Semaphore(behindClient, name, 1);
    let grantedAt = 0;
    const waiting = behind.acquire(30_000, { maxAttempts: 1000, acquireTimeoutMs: 20_000 }).then((permit) => {
      grantedAt = Date.now();
      return permit;
    });
    for (let i = 0; i < 100 && (await lineLength()) !== 2; i++) await sleep(20);
    expect(await lineLength()).toBe(2);
    // It dies: its requests fail from now on, leaving the line among them.
    for (const node of deadView) node.kill();
    controller.abort(new Error("died"));
    expect(await dying).toMatchObject({ code: "ABORTED" });
    await sleep(50);
    // Its place lasts until its lease runs out, by the gate's clock (here the test's own).
    const [deadId] = (await gate.command(["ZRANGE", lineKey, 0, 0], new AbortController().signal)) as string[];
    const leaseEnd = Number(
      await gate.command(["ZSCORE", lineKeys("", name)[1], deadId as string], new AbortController().signal),
    );
    const releasedAt = Date.now();
    expect(leaseEnd).toBeGreaterThan(releasedAt);
    await holder.release();
    const permit = await waiting;
    // Granted once the dead waiter's lease ran out, not before (whole ms on the node's clock).
    expect(grantedAt).toBeGreaterThanOrEqual(leaseEnd - 1);
    await behindClient.settled();
    expect(await lineLength()).toBe(0);
    await permit.release();
  });
});

describe("coming back", () => {
  it("a client that waited lately and takes a permit again right after its release goes to the back of the line", async () => {
    const nodes = memoryNodes(3);
    const name = "again";
    const holder = await new Semaphore(new Redlock({ nodes }), name, 1).acquire(30_000);
    const a = new Semaphore(new Redlock({ nodes }), name, 1);
    const b = new Semaphore(new Redlock({ nodes }), name, 1);
    const [lineKey] = lineKeys("", name);
    const gate = nodes[lineGate(lineKey, 3)] as MemoryNode;
    const lineLength = () => gate.command(["ZCARD", lineKey], new AbortController().signal);
    const order: string[] = [];
    const options = { maxAttempts: 1000, acquireTimeoutMs: 20_000 };
    const first = a.acquire(30_000, options).then((permit) => {
      order.push("a");
      return permit;
    });
    for (let i = 0; i < 100 && (await lineLength()) !== 1; i++) await sleep(10);
    const second = b.acquire(30_000, options).then((permit) => {
      order.push("b");
      return permit;
    });
    for (let i = 0; i < 100 && (await lineLength()) !== 2; i++) await sleep(10);
    await holder.release();
    const permitA = await first;
    // A releases and comes back at once, before B's next poll: it joins the line behind B.
    await permitA.release();
    const again = a.acquire(30_000, options).then((permit) => {
      order.push("a");
      return permit;
    });
    const next = await Promise.race([second, again]);
    expect(order).toEqual(["a", "b"]);
    await next.release();
    await (await again).release();
    await (await second).release();
    expect(order).toEqual(["a", "b", "a"]);
  });
});

describe("leaving the line", () => {
  it("a waiter that gives up (its signal, its deadline) leaves the line at once: the next is first", async () => {
    const nodes = memoryNodes(3);
    const name = "leaving";
    const holder = await new Semaphore(new Redlock({ nodes }), name, 1).acquire(30_000);
    const [lineKey] = lineKeys("", name);
    const gate = nodes[lineGate(lineKey, 3)] as MemoryNode;
    const line = async () => (await gate.command(["ZRANGE", lineKey, 0, -1], new AbortController().signal)) as string[];
    const controller = new AbortController();
    const aborting = new Redlock({ nodes });
    const aborted = new Semaphore(aborting, name, 1)
      .acquire(30_000, { signal: controller.signal, maxAttempts: 1000 })
      .catch((e: unknown) => e);
    const timing = new Redlock({ nodes });
    const timedOut = new Semaphore(timing, name, 1).acquire(30_000, { acquireTimeoutMs: 400 }).catch((e: unknown) => e);
    for (let i = 0; i < 100 && (await line()).length < 2; i++) await sleep(10);
    expect(await line()).toHaveLength(2);
    controller.abort(new Error("stop"));
    expect(await aborted).toMatchObject({ code: "ABORTED" });
    await aborting.settled();
    expect(await line()).toHaveLength(1);
    expect(await timedOut).toMatchObject({ code: "ACQUIRE_TIMEOUT" });
    await timing.settled();
    expect(await line()).toEqual([]);
    await holder.release();
  });
});

describe("the gate down", () => {
  it("waiters are still granted, by backoff, and never more than k hold at once", async () => {
    const nodes = memoryNodes(3);
    const name = "gate-down";
    nodes[lineGate(lineKeys("", name)[0], 3)]?.down();
    const windows: Window[] = [];
    const client = async (c: number) => {
      const semaphore = new Semaphore(new Redlock({ nodes, requestTimeoutMs: 100 }), name, 2);
      for (let i = 0; i < 3; i++) {
        await semaphore.using(
          3000,
          async (_signal, permit) => {
            const start = performance.now();
            const claimedEnd = start + permit.remainingMs();
            await sleep(10);
            windows.push({ holder: `${c}-${i}`, start, end: Math.min(performance.now(), claimedEnd) });
          },
          { retryBaseDelayMs: 10, retryMaxDelayMs: 40, maxAttempts: 1000, requestBudget: 10_000 },
        );
      }
    };
    await Promise.all([0, 1, 2, 3, 4].map(client));
    expect(windows).toHaveLength(15);
    const result = checkPermits(windows, 2);
    expect(result.anomaly).toBeUndefined();
    expect(result.mostAtOnce).toBeLessThanOrEqual(2);
  });
});

describe("the arithmetic of the line", () => {
  it("the slot at a waiter's rank among the free ones, none when more wait ahead than slots are free", () => {
    const held = [true, false, true, false, false];
    expect(slotByRank(0, held, () => false)).toBe(1);
    expect(slotByRank(1, held, () => false)).toBe(3);
    expect(slotByRank(2, held, () => false)).toBe(4);
    expect(slotByRank(3, held, () => false)).toBeUndefined();
    expect(slotByRank(0, held, (slot) => slot === 1)).toBe(3);
  });

  it("a least pause far back, or when the budget would not last the wait; none near the front with requests to spare", () => {
    expect(pollGap(0, 0, 10_000, Number.POSITIVE_INFINITY)).toBe(0);
    expect(pollGap(6, 0, 10_000, Number.POSITIVE_INFINITY)).toBe(500);
    // 30 polls over 11.1 s, from the start: close first (the window of 10 a second bounds them), wider later.
    expect(pollGap(0, 0, 11_100, 30)).toBeCloseTo(100 * (112 ** (1 / 30) - 1), 6);
    expect(pollGap(0, 5000, 6100, 5)).toBeGreaterThan(500);
  });

  it.each([
    // The slot our turn waits for is due in 60 ms, our round trip 20 ms: land 5 ms after it.
    { due: [60, 300], behind: 0, rtt: 20, expected: 45 },
    // One more release ahead of us: the second soonest.
    { due: [300, 60], behind: 1, rtt: 20, expected: 285 },
    // Due sooner than a round trip: at once.
    { due: [10], behind: 0, rtt: 20, expected: 0 },
    // Far off: capped, so that the lease given with the poll covers the pause.
    { due: [5000], behind: 0, rtt: 20, expected: 1000 },
    // Overdue, unknown (no hold seen end yet), or not enough holders: the patient pace.
    { due: [0, 80], behind: 0, rtt: 20, expected: 100 },
    { due: [-1, 80], behind: 1, rtt: 20, expected: 100 },
    { due: [80], behind: 1, rtt: 20, expected: 100 },
  ])("aimedPause($due, behind $behind, rtt $rtt) → $expected", ({ due, behind, rtt, expected }) => {
    expect(aimedPause(due, behind, rtt)).toBe(expected);
  });
});
