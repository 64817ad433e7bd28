/**
 * The Redlock core against 5 real redis-server nodes behind their REST bridges.
 */
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import {
  type AttemptReport,
  ConfigurationError,
  ExtensionLimitError,
  LockExpiredError,
  LockHeldError,
  LockLostError,
  QuorumUnavailableError,
  Redlock,
} from "../../src/index.js";
import { type NodeCluster, startNodes } from "../../tools/nodes/index.js";
import { expectClaimHolds } from "./support/claims.js";
import { raw, uniqueKey } from "./support/nodes.js";

const nodes = inject("nodes");

describe("mutual exclusion under real contention", () => {
  const CLIENTS = 20;
  const SECTIONS = 25;

  /** Non-atomic read-modify-write of a counter on node 0, with a pause to widen the race. */
  async function increment(counterKey: string): Promise<void> {
    const value = Number((await raw(nodes[0]!, "GET", counterKey)) ?? 0);
    await new Promise((r) => setTimeout(r, 1));
    await raw(nodes[0]!, "SET", counterKey, value + 1);
  }

  it("20 clients × 25 using() sections: the counter ends at 500 and no two holds overlap", async () => {
    const resource = uniqueKey("mutex");
    const counterKey = uniqueKey("counter");
    const intervals: [number, number][] = [];
    // Default options: waiting in line at the gate must carry this contention without tuning.
    const clients = Array.from({ length: CLIENTS }, () => new Redlock({ nodes }));
    await Promise.all(
      clients.map(async (redlock) => {
        for (let i = 0; i < SECTIONS; i++) {
          await redlock.using(resource, 5000, async (_signal, lock) => {
            const start = performance.now();
            // What the lock claims, checked against what the nodes hold, right after the grant.
            await expectClaimHolds(nodes, lock);
            await increment(counterKey);
            intervals.push([start, performance.now()]);
          });
        }
      }),
    );
    expect(Number(await raw(nodes[0]!, "GET", counterKey))).toBe(CLIENTS * SECTIONS);
    intervals.sort((a, b) => a[0] - b[0]);
    expect(intervals).toHaveLength(CLIENTS * SECTIONS);
    for (let i = 1; i < intervals.length; i++) {
      expect(intervals[i]![0], `hold ${i} starts before hold ${i - 1} ended`).toBeGreaterThanOrEqual(
        intervals[i - 1]![1],
      );
    }
  }, 300_000);

  it("the same workload without the lock loses updates (the test has teeth)", async () => {
    const counterKey = uniqueKey("unsafe");
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        for (let i = 0; i < SECTIONS; i++) await increment(counterKey);
      }),
    );
    expect(Number(await raw(nodes[0]!, "GET", counterKey))).toBeLessThan(CLIENTS * SECTIONS);
  });
});

describe("pre-occupied nodes", () => {
  async function occupy(count: number, key: string) {
    for (const node of nodes.slice(0, count)) await raw(node, "SET", key, "foreign-token", "PX", 60_000);
  }

  it("acquires with 2 of 5 nodes held by a foreign token", async () => {
    const key = uniqueKey("held2");
    await occupy(2, key);
    const redlock = new Redlock({ nodes, requestTimeoutMs: 2000 });
    const lock = await redlock.acquire(key, 10_000);
    // The vote may settle before the two "held" answers arrive.
    const outcomes = lock.acquireReport.nodes.map((n) => n.outcome);
    expect(outcomes.slice(2)).toEqual(["acquired", "acquired", "acquired"]);
    expect(outcomes.slice(0, 2).every((o) => o === "held" || o === "pending")).toBe(true);
    await lock.release();
  });

  it("fails with LockHeldError naming the 3 nodes when 3 of 5 are held, and leaves no key of ours", async () => {
    const key = uniqueKey("held3");
    await occupy(3, key);
    const redlock = new Redlock({ nodes, maxAttempts: 3, retryBaseDelayMs: 10, requestTimeoutMs: 2000 });
    const error = await redlock.acquire(key, 10_000).catch((e) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    expect(error.code).toBe("LOCK_HELD");
    // While the lock is held, waiting polls the gate instead of fanning out: at most 3 fan-outs.
    expect(error.attempts.length).toBeGreaterThanOrEqual(1);
    expect(error.attempts.length).toBeLessThanOrEqual(3);
    expect([...error.heldOn].sort()).toEqual(
      redlock.nodes
        .slice(0, 3)
        .map((n) => n.id)
        .sort(),
    );
    expect(error.message).toContain(redlock.nodes[0]!.id);
    await redlock.settled();
    const seen = await Promise.all(nodes.map((node) => raw(node, "GET", key)));
    expect(seen).toEqual(["foreign-token", "foreign-token", "foreign-token", null, null]);
  });
});

describe("with nodes killed, paused or slow", () => {
  let cluster: NodeCluster;
  const endpoints = () => cluster.nodes.map(({ url, token }) => ({ url, token }));

  beforeAll(async () => {
    cluster = await startNodes({ count: 5 });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it("acquires with 2 of 5 down, fails with QuorumUnavailableError within the deadline when 3 are down", async () => {
    await cluster.kill(3);
    await cluster.kill(4);
    const redlock = new Redlock({ nodes: endpoints(), acquireTimeoutMs: 1500, retryBaseDelayMs: 50 });
    const lock = await redlock.acquire(uniqueKey("down2"), 10_000);
    expect(lock.acquireReport.votes).toBe(3);
    await expectClaimHolds(endpoints(), lock);
    await lock.release();

    await cluster.kill(2);
    const started = performance.now();
    const error = await new Redlock({ nodes: endpoints(), maxAttempts: 3, retryBaseDelayMs: 50 })
      .acquire(uniqueKey("down3"), 10_000)
      .catch((e) => e);
    expect(error).toBeInstanceOf(QuorumUnavailableError);
    expect(error.attempts).toHaveLength(3);
    expect(error.nodes.filter((n: { outcome: string }) => n.outcome === "error")).toHaveLength(3);
    const timed = await new Redlock({
      nodes: endpoints(),
      acquireTimeoutMs: 800,
      retryBaseDelayMs: 50,
      // The deadline under test, not the request budget: it would end the attempts first.
      requestBudget: Infinity,
      maxAttempts: 1000,
    })
      .acquire(uniqueKey("down3"), 10_000)
      .catch((e) => e);
    expect(timed.code).toBe("ACQUIRE_TIMEOUT");
    expect(performance.now() - started).toBeLessThan(10 * 800);
    for (const i of [2, 3, 4]) await cluster.restart(i);
  });

  it("a node delayed past the per-request deadline does not slow the acquisition down", async () => {
    const redlock = new Redlock({ nodes: endpoints(), requestTimeoutMs: 1000 });
    const measure = async () => {
      const samples: number[] = [];
      for (let i = 0; i < 10; i++) {
        const lock = await redlock.acquire(uniqueKey("latency"), 10_000);
        samples.push(lock.acquireReport.elapsedMs);
        if (i < 2) {
          // The claim after a grant and after an extension (a slow node's audit read times out).
          await expectClaimHolds(endpoints(), lock);
          await lock.extend(4000);
          await expectClaimHolds(endpoints(), lock);
        }
        await lock.release();
      }
      return samples.sort((a, b) => a - b)[5]!;
    };
    const baseline = await measure();
    cluster.setDelay(4, 3000);
    try {
      const delayed = await measure();
      // Waiting for the slow node would take ≥ 1000 ms (its deadline).
      expect(delayed).toBeLessThan(Math.max(10 * baseline, 100));
      console.log(
        `median acquire latency: ${baseline.toFixed(1)} ms normally, ${delayed.toFixed(1)} ms with one node 3 s slow`,
      );
    } finally {
      cluster.setDelay(4, 0);
    }
  });

  it("using(): nodes killed during the routine abort the signal before the deadline; onLockLost fires once", async () => {
    const onLockLost = vi.fn();
    const redlock = new Redlock({ nodes: endpoints(), onLockLost, requestTimeoutMs: 100 });
    let remainingAtAbort = Number.NaN;
    let deadlineAtAbort = Number.NaN;
    const error = await redlock
      .using(uniqueKey("lost"), 1500, async (signal, lock) => {
        await expectClaimHolds(endpoints(), lock);
        await Promise.all([cluster.kill(0), cluster.kill(1), cluster.kill(2)]);
        await new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => {
            remainingAtAbort = lock.remainingMs();
            deadlineAtAbort = lock.expiresAt - Date.now();
            resolve();
          }),
        );
        throw signal.reason;
      })
      .catch((e) => e);
    expect(error).toBeInstanceOf(LockLostError);
    expect(remainingAtAbort).toBeGreaterThan(0);
    expect(deadlineAtAbort).toBeGreaterThan(0);
    expect(onLockLost).toHaveBeenCalledTimes(1);
    for (const i of [0, 1, 2]) await cluster.restart(i);
  });

  it("using(): a throwing routine's error reaches the caller even when release fails", async () => {
    const onReleaseError = vi.fn();
    const redlock = new Redlock({ nodes: endpoints(), onReleaseError });
    const error = await redlock
      .using(uniqueKey("throws"), 5000, async () => {
        await Promise.all([cluster.kill(0), cluster.kill(1), cluster.kill(2)]);
        throw new Error("the routine failed");
      })
      .catch((e) => e);
    expect(error).toEqual(new Error("the routine failed"));
    expect(onReleaseError).toHaveBeenCalledTimes(1);
    for (const i of [0, 1, 2]) await cluster.restart(i);
  });
});

describe("even N", () => {
  it("on 4 nodes split 2-2 the attempt settles and fails", async () => {
    const four = nodes.slice(0, 4);
    const key = uniqueKey("split");
    // Another node list over the shared nodes: a lock namespace of its own (see docs/deployments.md).
    const keyPrefix = `${uniqueKey("four")}:`;
    for (const node of four.slice(0, 2)) await raw(node, "SET", keyPrefix + key, "foreign-token", "PX", 60_000);
    const redlock = new Redlock({ nodes: four, keyPrefix, maxAttempts: 1 });
    const error = await redlock.acquire(key, 10_000).catch((e) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    expect(error.attempts[0].votes).toBeLessThan(3);
  });
});

describe("extend and release on real nodes", () => {
  it("extend keeps the token and pushes the PTTL out on every node", async () => {
    const redlock = new Redlock({ nodes });
    const key = uniqueKey("extend");
    const lock = await redlock.acquire(key, 2000);
    const token = lock.token;
    await lock.extend(30_000);
    expect(lock.token).toBe(token);
    // The extension settled at a quorum: the slowest nodes may still be applying it.
    await vi.waitFor(
      async () => {
        const view = await redlock.inspect(key, { revealTokens: true });
        for (const node of view.nodes) {
          expect(node).toMatchObject({ value: token });
          expect((node as { pttlMs: number }).pttlMs).toBeGreaterThan(20_000);
        }
      },
      { timeout: 3000, interval: 50 },
    );
    await lock.release();
  });

  it("refuses to extend after expiry, no key reappears, and release still resolves", async () => {
    const redlock = new Redlock({ nodes });
    const key = uniqueKey("expired");
    const lock = await redlock.acquire(key, 300);
    await new Promise((r) => setTimeout(r, 400));
    await expect(lock.extend(10_000)).rejects.toBeInstanceOf(LockExpiredError);
    const seen = await Promise.all(nodes.map((node) => raw(node, "GET", key)));
    expect(seen).toEqual([null, null, null, null, null]);
    const result = await lock.release();
    expect(result.released).toBe(0);
    expect(result.nodes.map((n) => n.outcome)).not.toContain("released");
    expect(result.nodes.filter((n) => n.outcome === "not-held").length).toBeGreaterThanOrEqual(3);
  });

  it("never revives a key that expired on the nodes while the client thought it valid", async () => {
    const redlock = new Redlock({ nodes, driftFactor: 0 });
    const key = uniqueKey("revive");
    const lock = await redlock.acquire(key, 5000);
    // The acquisition settles at a quorum; its last SETs may still be on their way. Let them land
    // first, or one landing after the DEL below would look like a revived key.
    for (let tries = 0; tries < 200; tries++) {
      const held = await Promise.all(nodes.map((node) => raw(node, "EXISTS", key)));
      if (held.every((n) => n === 1)) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    for (const node of nodes) await raw(node, "DEL", key);
    const error = await lock.extend(5000).catch((e) => e);
    expect(error.code).toBe("EXTEND_FAILED");
    expect(lock.signal.aborted).toBe(true);
    const seen = await Promise.all(nodes.map((node) => raw(node, "EXISTS", key)));
    expect(seen).toEqual([0, 0, 0, 0, 0]);
  });

  it("enforces the extension cap", async () => {
    const lock = await new Redlock({ nodes, maxExtensions: 2 }).acquire(uniqueKey("cap"), 5000);
    await lock.extend();
    await lock.extend();
    await expect(lock.extend()).rejects.toBeInstanceOf(ExtensionLimitError);
    await lock.release();
  });

  it("multi-resource locks are all-or-nothing on each node", async () => {
    const redlock = new Redlock({ nodes });
    const [a, b, c] = [uniqueKey("a"), uniqueKey("b"), uniqueKey("c")];
    const first = await redlock.acquire([a, b], 5000);
    const error = await redlock.acquire([b, c], 5000, { maxAttempts: 1 }).catch((e) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    await redlock.settled();
    const seen = await Promise.all(nodes.map((node) => raw(node, "EXISTS", c)));
    expect(seen).toEqual([0, 0, 0, 0, 0]);
    await first.release();
    const second = await redlock.acquire([c, b], 5000);
    expect(second.resources).toEqual([b, c].sort());
    await second.release();
  });
});

describe("configuration and bad answers on real HTTP", () => {
  it("a wrong token fails fast with ConfigurationError", async () => {
    const redlock = new Redlock({ nodes: nodes.map((n) => ({ ...n, token: "wrong" })) });
    const error = await redlock.acquire(uniqueKey("token"), 5000).catch((e) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error.message).toMatch(/HTTP 401/);
    // The per-node outcome of a node that refused the token carries its HTTP status.
    expect(error.status).toBe(401);
    const refused = (error.attempts as AttemptReport[]).flatMap((a) => a.nodes).filter((n) => n.outcome === "error");
    expect(refused.length).toBeGreaterThan(0);
    for (const outcome of refused) expect(outcome.status).toBe(401);
  });
});
