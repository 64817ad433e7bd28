/**
 * Fenced grants against the 5 shared real nodes: 20 concurrent clients × 50 grants each, through
 * `redlock.acquire(…)` with `fencing: true` and the defaults (waiting in line, the request budget). The
 * grant order comes from a counter incremented under the lock on a separate key; the fences,
 * sorted by that order, must strictly increase (hence also be unique). Also prints what a fenced
 * grant costs against a plain one (figures only, no timing assertions).
 */
import { describe, expect, inject, it } from "vitest";
import { fanOut } from "../../src/core/fanout.js";
import { acquireOnNode } from "../../src/core/node-operations.js";
import { randomToken } from "../../src/core/token.js";
import { fencedAttempt } from "../../src/fencing/attempt.js";
import { fencing } from "../../src/fencing/index.js";
import { initializeFencing } from "../../src/fencing/initialize.js";
import { Redlock } from "../../src/index.js";
import { restNode } from "../../src/transport/rest.js";
import { fenceOrderViolations, type OrderedGrant, percentile, releaseEverywhere } from "./support/fencing.js";
import { raw, uniqueKey } from "./support/nodes.js";

const endpoints = inject("nodes");
const nodes = endpoints.map((e) => restNode(e));
const clock = { now: () => performance.now() };
const TTL_MS = 5000;
const QUORUM = 3;

function attempt(keyPrefix: string, token: string) {
  return fencedAttempt({
    nodes,
    keyPrefix,
    resources: ["r"],
    token,
    ttlMs: TTL_MS,
    quorum: QUORUM,
    requestTimeoutMs: 1000,
    quarantineMs: TTL_MS + Math.floor(TTL_MS * 0.01) + 2,
    clock,
  });
}

describe("fenced grants on real nodes", () => {
  it("the order checker catches a fence that does not increase (negative control)", () => {
    expect(
      fenceOrderViolations([
        { order: 1, fence: "3" },
        { order: 2, fence: "9" },
        { order: 3, fence: "10" },
      ]),
    ).toEqual([]);
    expect(
      fenceOrderViolations([
        { order: 1, fence: "3" },
        { order: 2, fence: "10" },
        { order: 3, fence: "9" },
      ]),
    ).toHaveLength(1);
    expect(
      fenceOrderViolations([
        { order: 1, fence: "3" },
        { order: 2, fence: "3" },
      ]),
    ).toHaveLength(1);
  });

  it("20 clients × 50 grants: fences strictly increase in grant order", async () => {
    const CLIENTS = 20;
    const GRANTS = 50;
    const keyPrefix = `${uniqueKey("fence-conc")}:`;
    const orderKey = `${keyPrefix}order`;
    expect((await initializeFencing({ nodes, keyPrefix })).initialized).toBe(nodes.length);

    const grants: OrderedGrant[] = [];
    let attempts = 0;
    let requests = 0;
    const started = performance.now();
    // Through the public API with its default waiting, each client its own Redlock.
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        const redlock = new Redlock({
          nodes: endpoints,
          keyPrefix,
          fencing,
          acquireTimeoutMs: 300_000,
          onAttempt: (report) => {
            if (report.operation !== "acquire") return;
            attempts++;
            requests += report.requests;
          },
        });
        for (let granted = 0; granted < GRANTS; granted++) {
          const lock = await redlock.acquire("r", TTL_MS);
          const order = (await raw(endpoints[0]!, "INCR", orderKey)) as number;
          grants.push({ order, fence: lock.fence as string });
          await lock.release();
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `fenced contention: ${grants.length} grants, ${attempts} attempts, ${requests} requests ` +
        `(${(requests / attempts).toFixed(2)} per attempt), ${(grants.length / seconds).toFixed(1)} grants/s`,
    );
    expect(grants).toHaveLength(CLIENTS * GRANTS);
    expect(new Set(grants.map((g) => g.fence)).size).toBe(grants.length);
    expect(grants.map((g) => g.order).sort((a, b) => a - b)).toEqual(grants.map((_, i) => i + 1));
    expect(fenceOrderViolations(grants)).toEqual([]);
  }, 450_000);

  it("costs 2 round trips and at most 2N requests uncontended (prints latency against a plain grant)", async () => {
    const keyPrefix = `${uniqueKey("fence-cost")}:`;
    await initializeFencing({ nodes, keyPrefix });
    const ROUNDS = 100;
    const fenced: number[] = [];
    const plain: number[] = [];
    const requestCounts = new Set<number>();
    for (let i = 0; i < ROUNDS; i++) {
      const token = randomToken();
      const result = await attempt(keyPrefix, token);
      expect(result.granted).toBe(true);
      expect(result.phases).toHaveLength(2);
      const granting = result.phases[0]?.nodes.filter((n) => n.outcome === "acquired").length ?? 0;
      expect(result.requests).toBe(nodes.length + granting);
      expect(result.requests).toBeLessThanOrEqual(2 * nodes.length);
      requestCounts.add(result.requests);
      fenced.push(result.decidedAt - result.startedAt);
      await releaseEverywhere(nodes, [`${keyPrefix}r`], token);

      const plainToken = randomToken();
      const fan = fanOut({
        nodeIds: nodes.map((n) => n.id),
        yes: "acquired",
        quorum: QUORUM,
        timeoutMs: 1000,
        clock,
        task: (n, context) => acquireOnNode(nodes[n]!, [`${keyPrefix}plain`], plainToken, TTL_MS, context),
      });
      const decided = await fan.decided;
      expect(decided.granted).toBe(true);
      plain.push(decided.decidedAt - fan.startedAt);
      await fan.outcomes;
      await releaseEverywhere(nodes, [`${keyPrefix}plain`], plainToken);
    }
    const ms = (values: number[]) =>
      `p50 ${percentile(values, 50).toFixed(2)} ms, p95 ${percentile(values, 95).toFixed(2)} ms`;
    console.log(
      `uncontended, ${nodes.length} local nodes, ${ROUNDS} grants each: fenced ${ms(fenced)} ` +
        `(requests per grant: ${[...requestCounts].sort().join(" or ")}); plain ${ms(plain)} (${nodes.length} requests)`,
    );
  }, 120_000);
});
