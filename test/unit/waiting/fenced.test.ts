/**
 * Fenced acquisitions wait in line (src/waiting/in-line.ts): a poll takes the gate node with a
 * token, and a fenced attempt with that token follows on every node. On fake time, 8 isolates 20 ms
 * (one way) from 5 memory nodes call `acquire()` on one resource at once and hold it 30 ms. Every
 * call must be granted within its request budget, one holder at a time, with fences that
 * increase in grant order, and no lock may count its validity from later than the first request
 * that could have set one of its keys (the take's poll, not the fenced attempt after it). In one
 * isolate, a release wakes the waiter first in line: it takes no hand-over, but polls at once.
 * When the gate node fails, waiters fall back to fan-outs with backoff, spread within the budget
 * (`waiting/retry.ts`): 8 plain callers are all served. Fenced ones are not yet: each fan-out
 * costs 2N, and 8 of them on 4 nodes still give up on their budget (an open gap, docs/waiting.md).
 */
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { fencing, initializeFencing } from "../../../src/fencing/index.js";
import { fenceAcquireScript } from "../../../src/fencing/scripts/fence-acquire.js";
import {
  type Lock,
  type RedisArgument,
  type RedisNode,
  Redlock,
  type ReleaseResult,
  RequestBudgetError,
} from "../../../src/index.js";
import { gateIndex } from "../../../src/waiting/gate.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";
import { fakeClock, fakeNodes, isolateView } from "../support/fake-node.js";
import { run, useFakeTime } from "../support/fake-time.js";
import { seededRandom } from "../support/random.js";

useFakeTime();

const ISOLATES = 8;
const ONE_WAY_MS = 20;
const CRITICAL_MS = 30;
/** Short, so that validity counted from the fenced attempt instead of the take's poll (a poll's round trip of 40 ms later) passes the drift allowance of 12 ms. */
const TTL_MS = 1000;

/** Whether a request runs `script` (by its hash or its source). */
function runs(args: readonly RedisArgument[], script: { sha1: string; source: string }): boolean {
  return (args[0] === "EVALSHA" && args[1] === script.sha1) || (args[0] === "EVAL" && args[1] === script.source);
}

/** The token a request carries as a lock token: a gate poll's (ARGV[3]) or any script's first argument. */
function tokenOf(args: readonly RedisArgument[]): string | undefined {
  if (args[0] !== "EVALSHA" && args[0] !== "EVAL") return undefined;
  const token = args[3 + Number(args[2]) + (runs(args, gateScript) ? 2 : 0)];
  return typeof token === "string" ? token : undefined;
}

/** One grant as the callers saw it. */
interface Grant {
  readonly isolate: number;
  readonly fence: bigint;
  readonly grantedAt: number;
  readonly releasedAt: number;
  /** When the lock's validity ends, as the lock says at the grant. */
  readonly validUntil: number;
  /** When the first request carrying the lock's token left its isolate. */
  readonly firstSentAt: number;
}

/**
 * Isolate `isolate` acquires, holds the lock `holdMs` and releases it: the lock, and the grant as
 * its caller saw it (`firstSentAt`: when the first request carrying the lock's token left).
 */
async function holdOnce(
  isolate: number,
  acquire: () => Promise<Lock>,
  holdMs: number,
  firstSentAt: (lock: Lock, grantedAt: number) => number,
): Promise<{ lock: Lock; grant: Grant; released: ReleaseResult }> {
  const lock = await acquire();
  const grantedAt = Date.now();
  const validUntil = grantedAt + lock.remainingMs();
  await new Promise((r) => setTimeout(r, holdMs));
  const releasedAt = Date.now();
  const released = await lock.release();
  const fence = BigInt(lock.fence ?? "-1");
  return {
    lock,
    released,
    grant: { isolate, fence, grantedAt, releasedAt, validUntil, firstSentAt: firstSentAt(lock, grantedAt) },
  };
}

/** Pairs of grants in grant order whose holds overlap or whose fences do not increase. */
function violations(grants: readonly Grant[]): string[] {
  const sorted = [...grants].sort((a, b) => a.grantedAt - b.grantedAt);
  const found: string[] = [];
  for (let i = 1; i < sorted.length; i++) {
    const [before, after] = [sorted[i - 1] as Grant, sorted[i] as Grant];
    if (after.grantedAt < before.releasedAt) found.push(`isolates ${before.isolate} and ${after.isolate} overlap`);
    if (!(after.fence > before.fence)) found.push(`fence ${after.fence} after ${before.fence}`);
  }
  for (const g of grants) {
    if (g.validUntil > g.firstSentAt + TTL_MS) found.push(`isolate ${g.isolate}: validity past its keys' TTL`);
  }
  return found;
}

describe("fenced acquisitions wait in line", () => {
  it("the checker catches an overlap, a fence out of order and validity past the TTL (negative control)", () => {
    const grant = (isolate: number, fence: number, grantedAt: number, validUntil = grantedAt + 900): Grant => ({
      isolate,
      fence: BigInt(fence),
      grantedAt,
      releasedAt: grantedAt + CRITICAL_MS,
      validUntil,
      firstSentAt: grantedAt - 50,
    });
    expect(violations([grant(0, 1, 0), grant(1, 2, 100)])).toEqual([]);
    expect(violations([grant(0, 1, 0), grant(1, 2, 10)])).toHaveLength(1);
    expect(violations([grant(0, 2, 0), grant(1, 1, 100)])).toHaveLength(1);
    expect(violations([grant(0, 1, 0, 951)])).toHaveLength(1);
  });

  it("8 isolates on one key at once: all granted within the budget, in line, fences in grant order", async () => {
    const nodes = fakeNodes(5);
    /** Per token: when the first request carrying it left, and whether it was a gate poll. */
    const firstSent = new Map<string, { at: number; poll: boolean }>();
    const sent = new Array<number>(ISOLATES).fill(0);
    const fenceAcquires = new Array<number>(ISOLATES).fill(0);
    const isolate = (k: number): RedisNode[] =>
      isolateView(
        nodes,
        () => ONE_WAY_MS,
        (args) => {
          sent[k] = (sent[k] ?? 0) + 1;
          const token = tokenOf(args);
          if (token !== undefined && !firstSent.has(token)) {
            firstSent.set(token, { at: Date.now(), poll: runs(args, gateScript) });
          }
          if (runs(args, fenceAcquireScript)) fenceAcquires[k] = (fenceAcquires[k] ?? 0) + 1;
        },
      );
    const clients = Array.from(
      { length: ISOLATES },
      (_, k) => new Redlock({ nodes: isolate(k), clock: fakeClock, fencing, keyPrefix: "f:" }),
    );
    await run(initializeFencing(clients[0] as Redlock));
    sent.fill(0);
    const grants: Grant[] = [];
    const perCall: number[] = [];
    let takenAtGate = 0;
    await run(
      Promise.all(
        clients.map(async (redlock, k) => {
          const { lock, grant } = await holdOnce(
            k,
            () => redlock.acquire("r", TTL_MS),
            CRITICAL_MS,
            (held) => firstSent.get(held.token)?.at ?? Number.POSITIVE_INFINITY,
          );
          perCall.push(sent[k] as number);
          grants.push(grant);
          if (firstSent.get(lock.token)?.poll) takenAtGate++;
        }),
      ),
    );
    expect(grants).toHaveLength(ISOLATES);
    expect(violations(grants)).toEqual([]);
    expect(Math.max(...perCall), "requests of the costliest call, its release included").toBeLessThanOrEqual(40);
    // In line: every grant after the first few came from a poll that took the gate, and the calls
    // fanned out about once each after their first attempt (by backoff: 2-6 attempts each).
    expect(takenAtGate, "grants whose keys a poll of the gate took first").toBeGreaterThanOrEqual(ISOLATES - 2);
    const fanOuts = fenceAcquires.reduce((a, b) => a + b, 0) / 5;
    expect(fanOuts, "fenced attempts of all calls").toBeLessThanOrEqual(ISOLATES * 2.5);
    console.log(
      `fenced in line: requests per call ${perCall.join(", ")}; fenced phase-1 requests ${fenceAcquires.join(", ")}`,
    );
  });

  it("8 callers of one client on one key: a release in the isolate wakes the first in line", async () => {
    const nodes = fakeNodes(5);
    const view = isolateView(nodes, () => ONE_WAY_MS);
    const redlock = new Redlock({ nodes: view, clock: fakeClock, fencing, keyPrefix: "f:" });
    await run(initializeFencing(redlock));
    const grants: Grant[] = [];
    const holdLong = 200;
    await run(
      Promise.all(
        Array.from({ length: ISOLATES }, async (_, k) => {
          // Validity is checked by the test above; here its bound holds trivially.
          const { grant } = await holdOnce(
            k,
            () => redlock.acquire("r", TTL_MS),
            holdLong,
            (_, at) => at,
          );
          grants.push(grant);
        }),
      ),
    );
    expect(grants).toHaveLength(ISOLATES);
    expect(violations(grants)).toEqual([]);
    const sorted = [...grants].sort((a, b) => a.grantedAt - b.grantedAt);
    const gaps = sorted.slice(1).map((g, i) => g.grantedAt - (sorted[i] as Grant).releasedAt);
    console.log(`one isolate: release to next grant ${gaps.join(", ")} ms`);
    // Woken by the release's answer from the gate (a round trip after release() was called), the
    // first in line polls at once: a poll and the two rounds follow, 4 round trips in all. A
    // waiter that slept on to its next poll came a round trip later (203 ms here).
    const roundTrip = 2 * ONE_WAY_MS;
    for (const gap of gaps) expect(gap).toBeLessThanOrEqual(4.5 * roundTrip);
  });

  /**
   * ISOLATES isolates call `acquire("r")` at once, hold CRITICAL_MS and release, while the gate
   * node of "r" fails every request (`seed`: the library's draws). Per call what the budget counts
   * (its requests until it returned, and its release's), the most holders at once, the outcomes,
   * and when each isolate sent a `PTTL` probe.
   */
  async function gateDown(fenced: boolean, seed: number) {
    const draws = vi.spyOn(Math, "random").mockImplementation(seededRandom(seed));
    onTestFinished(() => draws.mockRestore());
    const nodes = fakeNodes(5);
    const sent = new Array<number>(ISOLATES).fill(0);
    const probes: number[][] = Array.from({ length: ISOLATES }, () => []);
    const isolate = (k: number): RedisNode[] =>
      isolateView(
        nodes,
        () => ONE_WAY_MS,
        (args) => {
          sent[k] = (sent[k] ?? 0) + 1;
          if (args[0] === "PTTL") probes[k]?.push(Date.now());
        },
      );
    const clients = Array.from(
      { length: ISOLATES },
      (_, k) => new Redlock({ nodes: isolate(k), clock: fakeClock, ...(fenced ? { fencing } : {}), keyPrefix: "f:" }),
    );
    if (fenced) await run(initializeFencing(clients[0] as Redlock));
    const gate = gateIndex(["f:r"], 5);
    (nodes[gate] as (typeof nodes)[number]).behaviour = { kind: "error" };
    sent.fill(0);
    const perCall: number[] = [];
    let holders = 0;
    let most = 0;
    const results = await run(
      Promise.allSettled(
        clients.map(async (redlock, k) => {
          const lock = await redlock.acquire("r", TTL_MS).catch((error: unknown) => {
            perCall.push(sent[k] as number);
            throw error;
          });
          const untilReturned = sent[k] as number;
          most = Math.max(most, ++holders);
          await new Promise((r) => setTimeout(r, CRITICAL_MS));
          holders--;
          perCall.push(untilReturned + (await lock.release()).report.requests);
        }),
      ),
    );
    return { results, most, perCall, probes };
  }

  // Waiting by backoff when the gate fails (see the module's note on fenced calls). The library's
  // draws are seeded: over seeds 1-10, all 8 were served at 9 seeds with the spread, at 4 without
  // it (this seed is one of the 6 that failed without).
  it("plain, 8 isolates while the gate node fails every request: all granted within the budget", async () => {
    const { results, most, perCall, probes } = await gateDown(false, 2);
    expect(results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []))).toEqual([]);
    expect(most).toBe(1);
    expect(Math.max(...perCall)).toBeLessThanOrEqual(40);
    // A plain waiter fans out (see `retry.heldNodes`).
    expect(probes.flat()).toEqual([]);
  });

  // Fenced, the same case: a fan-out costs 2N, and fan-outs spread over the budget served about
  // 3 of 8 calls a seed (30 of 80 over seeds 1-10, gate erroring; 40 hanging). A waiter now asks
  // one node that said "held" with one PTTL until the lock is free, and fans out then: 59 and 75
  // of 80. This seed served 7 (3 before).
  it("fenced, 8 isolates while the gate node fails every request: most granted within the budget, waiting by one-request probes", async () => {
    const { results, most, perCall, probes } = await gateDown(true, 3);
    expect(results.filter((r) => r.status === "fulfilled").length).toBeGreaterThanOrEqual(7);
    expect(most).toBe(1);
    expect(Math.max(...perCall)).toBeLessThanOrEqual(40);
    // They waited by probes, at most 10 a second each.
    expect(probes.flat().length).toBeGreaterThan(ISOLATES);
    for (const times of probes) {
      for (let i = 1; i < times.length; i++)
        expect((times[i] as number) - (times[i - 1] as number)).toBeGreaterThanOrEqual(100);
    }
  });

  it.each([
    ["both gates answering", false],
    ['the gate of "a\\nb" failing on the first cluster (its callers wait by probes)', true],
  ])(
    "two clusters with the same node ids, resource names with separators, every release twice, %s: each grant backed by its own cluster",
    async (_, gateFails) => {
      // The library's draws, seeded: with the gate failing, whether every caller is served within
      // its budget depends on them (seeds 4 and 15 of 1-16 leave one fenced caller of "a\nb" giving
      // up with RequestBudgetError, the open gap in docs/waiting.md; unseeded, 3 runs of 20 failed).
      vi.spyOn(Math, "random").mockImplementation(seededRandom(1));
      onTestFinished(() => vi.mocked(Math.random).mockRestore());
      // One isolate, two clusters whose nodes carry the same ids (n0..n4); on each, 4 fenced callers
      // of "a\nb" and 4 of the set ["a", "b"] (a different lock: its keys are "f:a" and "f:b").
      const clusters = [fakeNodes(5), fakeNodes(5)];
      // Each cluster's probes, by the key they asked about.
      const probed = clusters.map(() => [] as string[]);
      const views = clusters.map((nodes, c) =>
        isolateView(
          nodes,
          () => ONE_WAY_MS,
          (args) => {
            if (args[0] === "PTTL") probed[c]?.push(String(args[1]));
          },
        ),
      );
      const clients = views.map((nodes) => new Redlock({ nodes, clock: fakeClock, fencing, keyPrefix: "f:" }));
      for (const client of clients) await run(initializeFencing(client));
      if (gateFails) {
        const first = clusters[0] as ReturnType<typeof fakeNodes>;
        (first[gateIndex(["f:a\nb"], 5)] as (typeof first)[number]).behaviour = { kind: "error" };
      }
      const grants = new Map<string, Grant[]>();
      let unbacked = 0;
      let crossed = 0;
      let releasedTwice = 0;
      let gaveUp = 0;
      const caller = async (c: number, resources: string | string[], k: number) => {
        const redlock = clients[c] as Redlock;
        const nodes = clusters[c] as ReturnType<typeof fakeNodes>;
        const held = await holdOnce(
          k,
          async () => {
            const lock = await redlock.acquire(resources, TTL_MS);
            // The nodes' own keys: a quorum of this cluster holds every key of the grant's token.
            const backed = nodes.filter((n) => lock.keys.every((key) => n.get(key) === lock.token)).length;
            if (backed < 3) unbacked++;
            // And no node of the other cluster holds it.
            const other = clusters[1 - c] as ReturnType<typeof fakeNodes>;
            if (other.some((n) => lock.keys.some((key) => n.get(key) === lock.token))) crossed++;
            return lock;
          },
          CRITICAL_MS,
          // Validity is checked by the 8-isolate test; here its bound holds trivially.
          (_, grantedAt) => grantedAt,
        ).catch((error: unknown) => {
          if (!(error instanceof RequestBudgetError)) throw error;
          gaveUp++;
        });
        if (held === undefined) return;
        const { lock, grant, released } = held;
        // Released a second time, later: the first release's result again, no request sent.
        await new Promise((r) => setTimeout(r, CRITICAL_MS));
        if ((await lock.release()) === released) releasedTwice++;
        const name = `${c} ${JSON.stringify(resources)}`;
        grants.set(name, [...(grants.get(name) ?? []), grant]);
      };
      await run(
        Promise.all(
          [0, 1].flatMap((c) => [0, 1, 2, 3].flatMap((k) => [caller(c, "a\nb", k), caller(c, ["a", "b"], k)])),
        ),
      );
      await run(Promise.all(clients.map((client) => client.settled())));
      expect(gaveUp).toBe(0);
      expect(unbacked).toBe(0);
      expect(crossed).toBe(0);
      expect(releasedTwice).toBe(16);
      expect([...grants.values()].map((g) => g.length)).toEqual([4, 4, 4, 4]);
      // Per cluster and lock: one holder at a time, fences in grant order.
      for (const g of grants.values()) expect(violations(g)).toEqual([]);
      // Probes only where the gate failed, each of the one key "f:a\nb", separator and all.
      expect(probed[1]).toEqual([]);
      if (gateFails) {
        expect(probed[0]?.length).toBeGreaterThan(0);
        expect(new Set(probed[0])).toEqual(new Set(["f:a\nb"]));
      } else expect(probed[0]).toEqual([]);
    },
  );
});
