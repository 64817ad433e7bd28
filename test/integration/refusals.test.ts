/**
 * What a refusal is called, and how long it takes, against real nodes (issue 30):
 * - one node down, the lock held on the other four: contention, every time (`null` from
 *   `tryAcquire()`, `LOCK_HELD` from `acquire()`), whether the down node answers first (killed:
 *   its bridge answers 503 at once) or last (paused: it answers nothing until the deadline);
 * - the time each failure takes with the defaults, measured (the README's figures come from here).
 */
import { afterEach, describe, expect, it } from "vitest";
import { LockHeldError, QuorumUnavailableError, Redlock } from "../../src/index.js";
import { foreignClient } from "./support/isolates.js";
import { type Endpoint, uniqueKey } from "./support/nodes.js";
import { useOwnCluster } from "./support/own-cluster.js";

const nodesOf = useOwnCluster();
const endpoints = (): Endpoint[] => nodesOf().nodes.map(({ url, token }) => ({ url, token }));

afterEach(async () => {
  nodesOf().resume(0);
  await nodesOf().restart(0);
});

describe("one node down, the lock held on the other four: contention, 20 of 20 times", () => {
  it.each([
    ["killed (it answers first)", () => nodesOf().kill(0)],
    ["paused (it answers last)", async () => nodesOf().pause(0)],
  ])(
    "node 0 %s",
    async (_, down) => {
      const key = uniqueKey("held-one-down");
      const holder = await foreignClient(endpoints()).acquire(key, 60_000);
      try {
        await down();
        const nulls = [];
        const held = [];
        for (let i = 0; i < 20; i++) {
          // A TTL of 2 s: a node that answers nothing costs its request deadline, 200 ms.
          nulls.push(await foreignClient(endpoints()).tryAcquire(key, 2000));
          held.push(
            await foreignClient(endpoints(), { maxAttempts: 2, retryBaseDelayMs: 20 })
              .acquire(key, 10_000)
              .then(
                () => "acquired",
                (e: unknown) => e,
              ),
          );
        }
        expect(nulls.filter((n) => n === null)).toHaveLength(20);
        expect(held.filter((e) => e instanceof LockHeldError)).toHaveLength(20);
      } finally {
        await holder.release();
      }
    },
    120_000,
  );

  it("negative control: three nodes down is an outage, not contention", async () => {
    const key = uniqueKey("held-three-down");
    const holder = await foreignClient(endpoints()).acquire(key, 60_000);
    try {
      await Promise.all([nodesOf().kill(0), nodesOf().kill(1), nodesOf().kill(2)]);
      const error = await foreignClient(endpoints())
        .tryAcquire(key, 10_000)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(QuorumUnavailableError);
    } finally {
      await Promise.all([nodesOf().restart(1), nodesOf().restart(2)]);
      await holder.release();
    }
  }, 60_000);
});

describe("how long each failure takes with the defaults (printed for the README)", () => {
  it("held elsewhere, every node down, a wrong URL path, a rejected token", async () => {
    const timed = async (what: string, run: () => Promise<unknown>) => {
      const started = performance.now();
      const outcome = await run().then(
        () => "resolved",
        (e: { code?: string }) => e.code ?? String(e),
      );
      const ms = Math.round(performance.now() - started);
      console.log(`failure timing: ${what}: ${outcome} after ${ms} ms`);
      return { outcome, ms };
    };
    const key = uniqueKey("timings");
    const holder = await foreignClient(endpoints()).acquire(key, 60_000);
    try {
      const held = await timed("held elsewhere", () => new Redlock({ nodes: endpoints() }).acquire(key, 10_000));
      expect(held.outcome).toBe("LOCK_HELD");
      const path = endpoints().map((e) => ({ ...e, url: `${e.url}/wrong/path` }));
      const wrongPath = await timed("a wrong URL path", () =>
        new Redlock({ nodes: path, clusterName: "wrong" }).acquire(key, 10_000),
      );
      expect(wrongPath.outcome).toBe("CONFIGURATION");
      const tokens = endpoints().map((e) => ({ ...e, token: "wrong" }));
      const rejected = await timed("a rejected token", () =>
        new Redlock({ nodes: tokens, clusterName: "tokens" }).acquire(key, 10_000),
      );
      expect(rejected.outcome).toBe("CONFIGURATION");
    } finally {
      await holder.release();
    }
    await Promise.all([0, 1, 2, 3, 4].map((i) => nodesOf().kill(i)));
    try {
      const down = await timed("every node down", () =>
        new Redlock({ nodes: endpoints(), clusterName: "down" }).acquire(uniqueKey("down"), 10_000),
      );
      // Retries stop at the request budget (40 requests: 7 fan-outs), not after the 10 attempts.
      expect(down.outcome).toBe("REQUEST_BUDGET");
    } finally {
      await Promise.all([1, 2, 3, 4].map((i) => nodesOf().restart(i)));
    }
  }, 120_000);
});
