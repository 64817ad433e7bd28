/**
 * Waiting by backoff within the request budget (`core/backoff-waiting.ts`): the read-write lock's
 * writers and the plain preset's mutex wait with fan-outs, each an attempt of N requests (2N for a
 * fenced write lock). On fake time, 12 isolates 5 ms (one way) from 5 nodes ask at once and hold
 * the lock 30 ms: each must be granted, one at a time, within its request budget. When the budget
 * allows fewer attempts than the retry schedule, the attempts left are spread to the end of the
 * wait rather than spent in its first second (where they all met the other writers and the calls
 * failed with `RequestBudgetError`). A semaphore's waiters (`semaphore-line.ts`) are held to the
 * same budget.
 */
import { describe, expect, it } from "vitest";
import { Redlock as PlainRedlock } from "../../../src/core/index.js";
import { fencing, initializeFencing } from "../../../src/fencing/index.js";
import { type Lock, ReadWriteLock, type RedisNode, Redlock, Semaphore } from "../../../src/index.js";
import { type FakeNode, fakeClock, fakeNodes, isolateView } from "../support/fake-node.js";
import { run, useFakeTime } from "../support/fake-time.js";

useFakeTime();

const ISOLATES = 12;
const ONE_WAY_MS = 5;
const HOLD_MS = 30;

/** Each isolate's view of `nodes`, counting the requests it sends. */
function isolates(nodes: readonly FakeNode[], sent: number[]): (k: number) => RedisNode[] {
  return (k) =>
    isolateView(
      nodes,
      () => ONE_WAY_MS,
      () => {
        sent[k] = (sent[k] ?? 0) + 1;
      },
    );
}

/**
 * `acquire` in each of ISOLATES isolates at once, each lock held HOLD_MS and released: the calls'
 * errors, the most requests one call and its release sent (everything its isolate sent from the
 * call until the release settled), and how many held at once at most.
 */
async function contend(acquire: (k: number) => Promise<Lock>, sent: number[]) {
  let holders = 0;
  let most = 0;
  const perCall: number[] = [];
  const results = await run(
    Promise.allSettled(
      Array.from({ length: ISOLATES }, async (_, k) => {
        const before = sent[k] ?? 0;
        const lock = await acquire(k);
        most = Math.max(most, ++holders);
        await new Promise((r) => setTimeout(r, HOLD_MS));
        holders--;
        await lock.release();
        perCall.push((sent[k] ?? 0) - before);
      }),
    ),
  );
  const errors = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
  return { errors, most, costliest: Math.max(0, ...perCall) };
}

describe("waiting by backoff stays within the request budget", () => {
  it.each([
    ["a read-write lock's writers", false],
    ["a read-write lock's fenced writers", true],
  ])("%s: all 12 granted, one at a time, each within 40 requests", async (_, fenced) => {
    const nodes = fakeNodes(5);
    const sent = new Array<number>(ISOLATES).fill(0);
    const view = isolates(nodes, sent);
    const clients = Array.from(
      { length: ISOLATES },
      (_, k) => new Redlock({ nodes: view(k), clock: fakeClock, ...(fenced ? { fencing } : {}) }),
    );
    if (fenced) await run(initializeFencing(clients[0] as Redlock));
    const outcome = await contend((k) => new ReadWriteLock(clients[k] as Redlock, "doc").acquireWrite(10_000), sent);
    expect(outcome.errors).toEqual([]);
    expect(outcome.most).toBe(1);
    expect(outcome.costliest).toBeLessThanOrEqual(40);
  });

  it("the plain preset's mutex: all 12 granted, one at a time, each within 40 requests", async () => {
    const nodes = fakeNodes(5);
    const sent = new Array<number>(ISOLATES).fill(0);
    const view = isolates(nodes, sent);
    const clients = Array.from({ length: ISOLATES }, (_, k) => new PlainRedlock({ nodes: view(k), clock: fakeClock }));
    const outcome = await contend((k) => (clients[k] as PlainRedlock).acquire("r", 10_000), sent);
    expect(outcome.errors).toEqual([]);
    expect(outcome.most).toBe(1);
    expect(outcome.costliest).toBeLessThanOrEqual(40);
  });
});

describe("a semaphore's line stays within the request budget", () => {
  it("12 isolates on a semaphore of 2 permits: all granted, at most 2 at a time, each within 40 requests", async () => {
    const nodes = fakeNodes(5);
    const sent = new Array<number>(ISOLATES).fill(0);
    const view = isolates(nodes, sent);
    const clients = Array.from({ length: ISOLATES }, (_, k) => new Redlock({ nodes: view(k), clock: fakeClock }));
    const outcome = await contend((k) => new Semaphore(clients[k] as Redlock, "pool", 2).acquire(10_000), sent);
    expect(outcome.errors).toEqual([]);
    expect(outcome.most).toBe(2);
    expect(outcome.costliest).toBeLessThanOrEqual(40);
  });
});
