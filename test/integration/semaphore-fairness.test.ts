/**
 * Waiting for a semaphore's permits against real nodes, each waiter a client of its own with its
 * own counting `fetch` (as separate isolates would be):
 * - with k permits held and W waiters arriving one by one, the permits that free up one at a time
 *   go to the waiters in arrival order; every call stays within `requestBudget` with its release
 *   and its leaving of the line (negative control, on the same schedule: waiting by backoff, the
 *   line refused, breaks the order and the same check says so);
 * - a waiter behind a permit that is never released ends within its budget;
 * - a waiter that dies (its requests fail from then on, leaving the line among them) holds the
 *   line up only until its lease runs out, by the gate node's clock;
 * - the line's gate down: every waiter still granted, by backoff, never more than k claimed
 *   windows at once, and never more than k tokens on a quorum of the nodes.
 */
import { describe, expect, it } from "vitest";
import { type Lock, Redlock, Semaphore } from "../../src/index.js";
import { primitiveKey } from "../../src/primitives/calls.js";
import { semaphoreLineScript } from "../../src/primitives/scripts/semaphore-line.js";
import { lineGate, lineKeys } from "../../src/primitives/semaphore-line.js";
import { checkPermits, onQuorum, type Window } from "../../tools/chaos/checkers/primitives.js";
import { type Endpoint, raw, uniqueKey } from "./support/nodes.js";
import { useOwnThreeNodes } from "./support/own-cluster.js";

const { endpoints } = useOwnThreeNodes();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not reached");
    await sleep(10);
  }
}

/** A client's own `fetch`: counts every request it sends, and can be told to refuse some, or all from now on. */
class Client {
  sent = 0;
  polls = 0;
  dead = false;
  constructor(readonly refuse: (body: string, url: string) => boolean = () => false) {}

  readonly fetch: typeof fetch = (input, init) => {
    const body = typeof init?.body === "string" ? init.body : "";
    const url = String(input);
    if (this.dead || this.refuse(body, url)) return Promise.reject(new TypeError("fetch failed"));
    this.sent++;
    if (body.includes(semaphoreLineScript.sha1) && !body.includes('"leave"')) this.polls++;
    return fetch(input, init);
  };

  /** The state an isolate's clients share is keyed by the clock object: one of its own makes this client an isolate of its own. */
  readonly clock = { now: () => performance.now() };

  redlock(options: { requestTimeoutMs?: number } = {}): Redlock {
    return new Redlock({ nodes: endpoints.map((e) => ({ ...e, fetch: this.fetch })), clock: this.clock, ...options });
  }
}

/** Where grants left arrival order: the first place whose waiter is not the next to arrive, or -1. */
function outOfOrder(grants: readonly number[]): number {
  return grants.findIndex((waiter, place) => waiter !== place);
}

/** A body that polls a semaphore's line: refused, the line is down for that client. */
const linePoll = (body: string) => body.includes(semaphoreLineScript.sha1) || body.includes("semaphore-line");

/**
 * k permits held; `waiters` clients arrive one by one, each once the one before has tried and
 * waits; then the permits free one at a time, each time by releasing the longest held.
 */
async function arrivalSchedule(
  name: string,
  k: number,
  waiters: number,
  refuse?: (body: string, url: string) => boolean,
  retry: object = {},
) {
  const held: Lock[] = [];
  for (let i = 0; i < k; i++) held.push(await new Semaphore(new Client().redlock(), name, k).acquire(30_000));
  const clients = Array.from({ length: waiters }, () => new Client(refuse));
  const redlocks = clients.map((c) => c.redlock());
  const granted: number[] = [];
  const permits = new Map<number, Lock>();
  const calls: Promise<void>[] = [];
  for (const [w, client] of clients.entries()) {
    const semaphore = new Semaphore(redlocks[w] as Redlock, name, k);
    calls.push(
      semaphore.acquire(30_000, { maxAttempts: 1000, acquireTimeoutMs: 25_000, ...retry }).then((permit) => {
        granted.push(w);
        permits.set(w, permit);
      }),
    );
    // Its first try (3 requests) and its first poll or probe.
    await until(() => client.sent >= 4, 5000);
    await sleep(100);
  }
  for (let step = 0; step < waiters; step++) {
    await (held.shift() as Lock).release();
    await until(() => granted.length > step, 20_000);
    held.push(permits.get(granted[step] as number) as Lock);
  }
  await Promise.all(calls);
  await Promise.all(held.map((permit) => permit.release()));
  await Promise.all(redlocks.map((r) => r.settled()));
  return { granted, clients };
}

describe("first come, first served across clients", () => {
  it("permits that free up one at a time go to the waiters in arrival order, each call within its budget", async () => {
    const { granted, clients } = await arrivalSchedule(uniqueKey("fcfs"), 2, 6);
    expect(outOfOrder(granted), `granted in the order ${granted.join(", ")}`).toBe(-1);
    for (const client of clients) {
      // The default requestBudget (40): its tries, polls, release and leaving of the line.
      expect(client.sent).toBeLessThanOrEqual(40);
      expect(client.polls).toBeGreaterThanOrEqual(1);
    }
  });

  it("negative control: waiting by backoff (the line refused) on the same schedule breaks the order, and the check says so", async () => {
    const { granted } = await arrivalSchedule(uniqueKey("fcfs-backoff"), 2, 6, linePoll, {
      retryBaseDelayMs: 20,
      retryMaxDelayMs: 2000,
    });
    expect(granted).toHaveLength(6);
    expect(outOfOrder(granted), `granted in the order ${granted.join(", ")}`).toBeGreaterThanOrEqual(0);
  });

  it("a waiter behind a permit never released ends within its budget, its leaving of the line included", async () => {
    const name = uniqueKey("budget");
    const holder = await new Semaphore(new Client().redlock(), name, 1).acquire(30_000);
    const client = new Client();
    const redlock = client.redlock();
    const error = await new Semaphore(redlock, name, 1)
      .acquire(30_000, { requestBudget: 20, retryMaxDelayMs: 300 })
      .catch((e: unknown) => e);
    expect(["REQUEST_BUDGET", "LOCK_HELD"]).toContain((error as { code?: string }).code);
    await redlock.settled();
    expect(client.sent).toBeLessThanOrEqual(20);
    expect(client.polls).toBeGreaterThanOrEqual(3);
    const [lineKey] = lineKeys("", name);
    expect(await raw(endpoints[lineGate(lineKey, 3)] as Endpoint, "ZCARD", lineKey)).toBe(0);
    await holder.release();
  });

  it("a waiter that dies holds the line up only until its lease runs out, by the gate's clock", async () => {
    const name = uniqueKey("dead");
    const [lineKey] = lineKeys("", name);
    const gate = endpoints[lineGate(lineKey, 3)] as Endpoint;
    const lineLength = () => raw(gate, "ZCARD", lineKey);
    const holder = await new Semaphore(new Client().redlock(), name, 1).acquire(30_000);
    const dying = new Client();
    const controller = new AbortController();
    const dyingCall = new Semaphore(dying.redlock({ requestTimeoutMs: 300 }), name, 1)
      .acquire(30_000, { signal: controller.signal, maxAttempts: 1000 })
      .catch((e: unknown) => e);
    await until(async () => (await lineLength()) === 1, 5000);
    const behind = new Client();
    const behindRedlock = behind.redlock({ requestTimeoutMs: 300 });
    let grantedAt = 0;
    const waiting = new Semaphore(behindRedlock, name, 1)
      .acquire(30_000, { maxAttempts: 1000, acquireTimeoutMs: 20_000 })
      .then((permit) => {
        grantedAt = Date.now();
        return permit;
      });
    await until(async () => (await lineLength()) === 2, 5000);
    // It dies: every request of its fails from now on, its leaving of the line among them.
    dying.dead = true;
    controller.abort(new Error("died"));
    expect(await dyingCall).toMatchObject({ code: "ABORTED" });
    await sleep(50);
    // Its place lasts until its lease runs out, by the gate's clock (the same machine's as ours).
    const [deadId] = (await raw(gate, "ZRANGE", lineKey, 0, 0)) as string[];
    const leaseEnd = Number(await raw(gate, "ZSCORE", lineKeys("", name)[1], deadId as string));
    const releasedAt = Date.now();
    expect(leaseEnd).toBeGreaterThan(releasedAt);
    await holder.release();
    const permit = await waiting;
    // Granted once the dead waiter's lease ran out, not before (whole ms on the node's clock).
    expect(grantedAt).toBeGreaterThanOrEqual(leaseEnd - 1);
    await behindRedlock.settled();
    expect(await lineLength()).toBe(0);
    await permit.release();
  });
});

describe("the line's gate down", () => {
  it("every waiter is granted, by backoff, never more than k at once, by the clients and on the nodes", async () => {
    const name = uniqueKey("gate-down");
    const gate = endpoints[lineGate(lineKeys("", name)[0], 3)] as Endpoint;
    const windows: Window[] = [];
    const slotKeys = [0, 1].map((i) => primitiveKey("", "semaphore", name, `${i}`));
    let mostOnNodes = 0;
    const client = async (c: number) => {
      const own = new Client((_body, url) => new URL(url).origin === new URL(gate.url).origin);
      const semaphore = new Semaphore(own.redlock({ requestTimeoutMs: 300 }), name, 2);
      for (let i = 0; i < 3; i++) {
        await semaphore.using(
          5000,
          async (_signal, permit) => {
            const start = performance.now();
            const claimedEnd = start + permit.remainingMs();
            const onNodes = await Promise.all(
              endpoints.map(
                async (e) => new Set((await Promise.all(slotKeys.map((k) => raw(e, "GET", k)))) as string[]),
              ),
            );
            mostOnNodes = Math.max(mostOnNodes, onQuorum(onNodes, 2).filter((t) => t !== null).length);
            await sleep(20);
            windows.push({ holder: `${c}-${i}`, start, end: Math.min(performance.now(), claimedEnd) });
          },
          { retryBaseDelayMs: 10, retryMaxDelayMs: 60, maxAttempts: 1000, requestBudget: 10_000 },
        );
      }
    };
    await Promise.all([0, 1, 2, 3, 4].map(client));
    expect(windows).toHaveLength(15);
    const result = checkPermits(windows, 2);
    expect(result.anomaly).toBeUndefined();
    expect(result.mostAtOnce).toBeGreaterThanOrEqual(1);
    expect(mostOnNodes).toBeGreaterThanOrEqual(1);
    expect(mostOnNodes).toBeLessThanOrEqual(2);
  });
});
