/**
 * Property-based check over random node behaviours: whatever the nodes do, a lock is never
 * reported held without a quorum holding its token and positive validity, and a failed
 * acquisition leaves none of our keys behind once its background cleanup is done.
 */
import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { type Lock, Redlock, RedlockError } from "../../src/index.js";
import { type Behaviour, FakeNode, fakeClock } from "./support/fake-node.js";
import { advanceUntil, inSteps, useFakeTime } from "./support/fake-time.js";

const behaviour: fc.Arbitrary<Behaviour & { occupied?: number }> = fc.oneof(
  fc.record({ kind: fc.constant("ok" as const), latencyMs: fc.integer({ min: 0, max: 300 }) }),
  fc.record({ kind: fc.constant("error" as const), latencyMs: fc.integer({ min: 0, max: 300 }) }),
  fc.record({ kind: fc.constant("hang" as const) }),
  fc.record({ kind: fc.constant("late" as const), latencyMs: fc.integer({ min: 0, max: 800 }) }),
  fc.record({ kind: fc.constant("garbage" as const), latencyMs: fc.integer({ min: 0, max: 300 }) }),
  // Held by a foreign token for a while.
  fc.record({
    kind: fc.constant("ok" as const),
    latencyMs: fc.integer({ min: 0, max: 300 }),
    occupied: fc.integer({ min: 1, max: 3000 }),
  }),
);

const scenario = fc.record({
  behaviours: fc.array(behaviour, { minLength: 1, maxLength: 7 }),
  ttlMs: fc.integer({ min: 200, max: 5000 }),
  requestTimeoutMs: fc.integer({ min: 20, max: 600 }),
  maxAttempts: fc.integer({ min: 1, max: 3 }),
  raiseQuorum: fc.boolean(),
  /** The default waiting strategy (the gate) instead of a fixed retry delay. */
  defaultWaiting: fc.boolean(),
  resources: fc.constantFrom<string[]>(["r"], ["a", "b"], ["x", "y", "z"]),
  /** Extensions after a grant: TTLs shorter and longer than what is left, after a pause. */
  extensions: fc.array(
    fc.record({ ttlMs: fc.integer({ min: 100, max: 6000 }), afterMs: fc.integer({ min: 0, max: 1500 }) }),
    { maxLength: 4 },
  ),
});

/**
 * The claim invariant, read from the nodes' own state in the same tick as the operation's
 * result: the lock's claimed deadline is no later than the quorum-th latest expiry of its keys.
 */
function claimExceedsKeys(nodes: FakeNode[], lock: Lock, quorum: number): string | undefined {
  const expiries = nodes
    .map((n) => {
      if (!lock.keys.every((k) => n.get(k) === lock.token)) return Number.NEGATIVE_INFINITY;
      return Math.min(...lock.keys.map((k) => (n.store.get(k) as { expiresAt: number }).expiresAt));
    })
    .sort((a, b) => b - a);
  const quorumExpiry = expiries[quorum - 1] ?? Number.NEGATIVE_INFINITY;
  const claimed = Date.now() + lock.remainingMs();
  return claimed > quorumExpiry ? `claims ${claimed - quorumExpiry} ms beyond the keys on a quorum` : undefined;
}

useFakeTime(5_000_000);

describe("safety over random node behaviours", () => {
  it("never reports a lock without a quorum and positive validity, and always cleans up", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const nodes = s.behaviours.map((b, i) => {
          const node = new FakeNode(`n${i}`);
          node.behaviour = b;
          if (b.occupied) for (const r of s.resources) node.occupy(r, "foreign", b.occupied);
          return node;
        });
        const majority = Math.floor(nodes.length / 2) + 1;
        const quorum = s.raiseQuorum ? Math.min(nodes.length, majority + 1) : majority;
        const redlock = new Redlock({
          nodes,
          clock: fakeClock,
          quorum,
          requestTimeoutMs: s.requestTimeoutMs,
          maxAttempts: s.maxAttempts,
          retryDelay: s.defaultWaiting ? undefined : () => 25,
        });

        let settled = false;
        let atGrant: { holders: number; remaining: number; overClaim: string | undefined } | undefined;
        const outcome = redlock.acquire(s.resources, s.ttlMs).then(
          (lock) => {
            // Checked in the same tick as the grant: no timer has run since.
            atGrant = {
              holders: nodes.filter((n) => lock.keys.every((k) => n.get(k) === lock.token)).length,
              remaining: lock.remainingMs(),
              overClaim: claimExceedsKeys(nodes, lock, quorum),
            };
            return lock;
          },
          (error: unknown) => (error instanceof RedlockError ? error : Promise.reject(error)),
        );
        void outcome.finally(() => {
          settled = true;
        });
        await advanceUntil(() => settled);
        const result = await outcome;

        if (!(result instanceof RedlockError)) {
          expect(atGrant?.holders).toBeGreaterThanOrEqual(quorum);
          expect(atGrant?.remaining).toBeGreaterThan(0);
          expect(result.acquireReport.votes).toBeGreaterThanOrEqual(quorum);
          expect(atGrant?.overClaim).toBeUndefined();
          for (const extension of s.extensions) {
            await vi.advanceTimersByTimeAsync(extension.afterMs);
            let overClaim: string | undefined;
            let extended = false;
            const done = result.extend(extension.ttlMs).then(
              () => {
                extended = true;
                overClaim = claimExceedsKeys(nodes, result, quorum);
              },
              () => {},
            );
            let finished = false;
            void done.finally(() => {
              finished = true;
            });
            await advanceUntil(() => finished);
            await done;
            if (extended) expect(overClaim).toBeUndefined();
          }
          // Release must then take our keys off every node that answers.
          for (const n of nodes) n.behaviour = { kind: "ok" };
          const released = result.release();
          await advanceUntil(() => false, inSteps(5, 1000));
          await released;
        } else {
          expect(result.attempts.length).toBeGreaterThan(0);
        }
        // Background cleanup, including requests that land late.
        let cleaned = false;
        void redlock.settled().then(() => {
          cleaned = true;
        });
        await advanceUntil(() => cleaned);
        await vi.advanceTimersByTimeAsync(1000);
        for (const node of nodes) {
          for (const key of s.resources) {
            const value = node.get(key);
            if (value !== undefined) expect(value).toBe("foreign");
          }
        }
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});
