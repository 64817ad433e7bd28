/**
 * Property-based checks. Over random node behaviours: whatever the nodes do, a lock is never
 * reported held without a quorum holding its token and positive validity, and a failed
 * acquisition leaves none of our keys behind once its background cleanup is done. Over random
 * uses and misuses of the API (the claim model, see support/claim-model.ts), with messages
 * delayed and reordered: no two Locks claim a resource at once, every claim is backed by the
 * nodes' own keys, and every grant has a token of its own.
 */
import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { type Lock, Redlock, RedlockError } from "../../src/index.js";
import { knownCases } from "./support/claim-cases.js";
import type { Checker } from "./support/claim-ledger.js";
import { type Defect, type RunStats, runScenario, uses } from "./support/claim-model.js";
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

describe("one token per holder, whatever users do with their locks", () => {
  const client = (config: ConstructorParameters<typeof Redlock>[0]) => new Redlock(config);

  it("no two Locks claim a resource at once, every claim is backed by a quorum of the nodes' keys, and no token is granted twice", async () => {
    let runs = 0;
    const totals: RunStats = {
      grants: 0,
      handedOver: 0,
      releasedAgainAfterHandOn: 0,
      byToken: 0,
      extensionInFlightAtRelease: 0,
    };
    await fc.assert(
      fc.asyncProperty(uses, async (s) => {
        const { violation, stats } = await runScenario(s, client);
        expect(violation).toBeUndefined();
        // The first actor acquires with patience: a run that grants nothing tested nothing.
        expect(stats.grants).toBeGreaterThanOrEqual(1);
        runs++;
        for (const key of Object.keys(totals) as (keyof RunStats)[]) totals[key] += stats[key];
      }),
      // 200 runs take a few seconds. The time limit ends a shrink (or a very slow machine's runs)
      // before the test's timeout: a test that timed out would run on beside the next ones.
      { numRuns: 200, interruptAfterTimeLimit: 60_000 },
    );
    expect(runs).toBeGreaterThanOrEqual(50);
    // The misuses happened, often: about 3.7 grants a run, one in five or six handed over in the
    // isolate, a lock released again after it was handed on in one run of three, a by-token
    // operation with a released lock's token about once a run, an extension in flight at release
    // in one run of five. The minimums are about half of that for grants, a quarter or less for
    // the rest.
    expect(totals.grants).toBeGreaterThanOrEqual(2 * runs);
    expect(totals.handedOver).toBeGreaterThanOrEqual(runs / 8);
    expect(totals.releasedAgainAfterHandOn).toBeGreaterThanOrEqual(runs / 16);
    expect(totals.byToken).toBeGreaterThanOrEqual(runs / 4);
    expect(totals.extensionInFlightAtRelease).toBeGreaterThanOrEqual(runs / 25);
  }, 120_000);

  it.each(knownCases)("a case that found a violation before: $name", async ({ scenario: s, handOvers }) => {
    const { violation, stats } = await runScenario(s, client);
    expect(violation).toBeUndefined();
    expect(stats.grants).toBeGreaterThanOrEqual(2);
    expect(stats.handedOver).toBeGreaterThanOrEqual(handOvers);
  });

  /**
   * A broken variant that `checker` alone must report on some scenario of a fixed sample whose
   * run without the defect it does not report: the checker catches the defect, not the library.
   */
  async function caughtBy(defect: Defect, checker: Checker): Promise<string | undefined> {
    for (const s of fc.sample(uses, { numRuns: 200, seed: 27 })) {
      const broken = await runScenario(s, client, [checker], defect);
      if (!broken.violation?.startsWith(`${checker}:`)) continue;
      if ((await runScenario(s, client, [checker])).violation === undefined) return broken.violation;
    }
    return undefined;
  }

  it.each([
    ["del-ignores-token", "overlap", "nodes whose compare-and-DEL deletes any token's keys"],
    ["pexpire-ignores-token", "backing", "nodes whose compare-and-PEXPIRE sets any token's keys' TTL"],
    ["reused-token", "token", "a client that hands out each Lock with the previous grant's token"],
  ] as const)(
    "negative control (%s): the %s checker reports %s",
    async (defect, checker, _description) => {
      expect(await caughtBy(defect, checker)).toMatch(new RegExp(`^${checker}: `));
    },
    60_000,
  );
});
