/**
 * The caller's limits hold wherever it waits or holds (issue 27), against real nodes:
 * - retry options mean the same in the isolate's queue as against a holder elsewhere (ports of
 *   node-redlock's test cases to this API): a `LockHeldError` lists the fan-outs the call made, and
 *   a custom `retryDelay` with `maxAttempts` spans the window it describes;
 * - `maxHoldMs` caps what the lock claims (its deadline never passes the grant's start plus
 *   `maxHoldMs`), not only the extensions.
 */
import { describe, expect, it } from "vitest";
import { type Lock, LockHeldError, LockLostError, Redlock, type UsingOptions } from "../../src/index.js";
import { auditClaim } from "./support/claims.js";
import { sleep } from "./support/isolates.js";
import { uniqueKey } from "./support/nodes.js";
import { useOwnCluster } from "./support/own-cluster.js";

const nodesOf = useOwnCluster();
const endpoints = () => nodesOf().nodes.map(({ url, token }) => ({ url, token }));

describe("retry options while the holder is in the same isolate", () => {
  it.each([
    {
      name: "individual locks are exclusive (node-redlock, retryCount 10)",
      label: "exclusive-retry-delay",
      resources: [""],
      client: { maxAttempts: 11, retryDelay: () => 200 },
      call: {},
      maxAttempts: 11,
    },
    {
      name: "individual locks are exclusive with the default retry delays",
      label: "exclusive-default-delay",
      resources: [""],
      client: { maxAttempts: 3 },
      call: {},
      maxAttempts: 3,
    },
    {
      name: "multi-resource locks are exclusive (maxAttempts 3, retryDelay 150 ms)",
      label: "multi-exclusive",
      resources: [":a", ":b"],
      client: {},
      call: { maxAttempts: 3, retryDelay: () => 150 },
      maxAttempts: 3,
    },
  ])("$name: LockHeldError lists the attempts made", async ({ label, resources, client, call, maxAttempts }) => {
    const redlock = new Redlock({ nodes: endpoints(), ...client });
    const key = uniqueKey(label);
    const names = resources.map((suffix) => key + suffix);
    const lock = await redlock.acquire(names, 30_000);
    try {
      const error = await redlock.acquire(names, 30_000, call).then(
        (second) => second.release().then(() => new Error("the lock was acquired twice")),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(LockHeldError);
      const attempts = (error as LockHeldError).attempts;
      expect(attempts.length, "attempts listed").toBeGreaterThanOrEqual(1);
      expect(attempts.length, "attempts listed").toBeLessThanOrEqual(maxAttempts);
      for (const attempt of attempts) expect(attempt.ok).toBe(false);
    } finally {
      await lock.release();
    }
  });

  it("a multi-resource acquire with maxAttempts 3 and retryDelay 150 ms gets the lock a 200 ms holder lets expire", async () => {
    const redlock = new Redlock({ nodes: endpoints() });
    const label = uniqueKey("multi-retry");
    const resources = [`${label}:a`, `${label}:b`];
    // Never released: its keys expire after 200 ms, within the 300 ms the retries span.
    await redlock.acquire(resources, 200);
    const lock = await redlock.acquire(resources, 1000, { maxAttempts: 3, retryDelay: () => 150 });
    expect(lock.acquireReport.ok).toBe(true);
    expect(lock.acquireReport.attempt).toBeLessThanOrEqual(3);
    await lock.release();
  });
});

describe("maxHoldMs caps the claim", () => {
  /** Latest claimed deadline, relative to `origin`, at samples every 10 ms for `forMs` (the routine ignores its signal). */
  async function sampleClaims(lock: Lock, origin: number, forMs: number): Promise<number> {
    let latest = Number.NEGATIVE_INFINITY;
    const until = performance.now() + forMs;
    while (performance.now() < until) {
      latest = Math.max(latest, performance.now() - origin + lock.remainingMs());
      await sleep(10);
    }
    return latest;
  }

  /** Clock reads around the grant (the start is read before the call, the lock's t0 just after). */
  const TOLERANCE_MS = 20;

  /** The latest claim of a routine that outlives the cap; using() then rejects with LockLostError. */
  async function usingWithCap(key: string, ttlMs: number, options: UsingOptions): Promise<number> {
    const redlock = new Redlock({ nodes: endpoints() });
    const start = performance.now();
    let latest = Number.NaN;
    const outcome = await redlock
      .using(
        key,
        ttlMs,
        async (_signal, lock) => {
          latest = await sampleClaims(lock, start, 1200);
        },
        options,
      )
      .catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LockLostError);
    return latest;
  }

  it("using(r, 500, routine, { maxHoldMs: 800 }): elapsed + remainingMs() stays within 800 ms", async () => {
    const latest = await usingWithCap(uniqueKey("max-hold-500"), 500, { maxHoldMs: 800 });
    expect(latest).toBeLessThanOrEqual(800 + TOLERANCE_MS);
  });

  it("using(r, 1000, routine, { maxHoldMs: 800 }): the grant itself claims no more than 800 ms", async () => {
    const latest = await usingWithCap(uniqueKey("max-hold-1000"), 1000, { maxHoldMs: 800 });
    expect(latest).toBeLessThanOrEqual(800 + TOLERANCE_MS);
  });

  it("acquire(r, 1000, { maxHoldMs: 800 }) and its extend(): the lock claims no more than 800 ms from the start", async () => {
    const redlock = new Redlock({ nodes: endpoints() });
    const start = performance.now();
    const lock = await redlock.acquire(uniqueKey("max-hold-acquire"), 1000, { maxHoldMs: 800 });
    expect(performance.now() - start + lock.remainingMs()).toBeLessThanOrEqual(800 + TOLERANCE_MS);
    await lock.extend(300).catch(() => undefined);
    expect(performance.now() - start + lock.remainingMs()).toBeLessThanOrEqual(800 + TOLERANCE_MS);
    const audit = await auditClaim(endpoints(), lock);
    expect(audit.violation).toBeUndefined();
    await lock.release();
  });

  it("a lock taken over from a holder of the same isolate: its claim stays within 800 ms of the grant", async () => {
    const redlock = new Redlock({ nodes: endpoints() });
    const key = uniqueKey("max-hold-taken-over");
    const holder = await redlock.acquire(key, 10_000);
    setTimeout(() => void holder.release(), 300);
    let grantStart = 0;
    let latest = Number.NaN;
    // The routine outlives the cap: using() says so (LockLostError) once it ends.
    const outcome = await redlock
      .using(
        key,
        500,
        async (_signal, lock) => {
          // The grant's start is at most its report's elapsed time before the routine starts.
          grantStart = performance.now() - lock.acquireReport.elapsedMs;
          latest = await sampleClaims(lock, grantStart, 1200);
        },
        { maxHoldMs: 800 },
      )
      .catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(grantStart).toBeGreaterThan(0);
    expect(latest).toBeLessThanOrEqual(800 + TOLERANCE_MS);
  });
});
