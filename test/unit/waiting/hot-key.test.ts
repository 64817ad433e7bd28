/**
 * A hot key under default options, on in-memory nodes with per-node jitter (clients reach the nodes
 * in different orders), on fake time: no overlap, no starvation, fair turns, and waiters that poll
 * one node rather than fan out on every poll; and resource sets that share keys.
 */
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { extendScript } from "../../../src/core/scripts/extend.js";
import { fencing, initializeFencing } from "../../../src/fencing/index.js";
import { AbortedError, LockHeldError, type RedisArgument, Redlock, RequestBudgetError } from "../../../src/index.js";
import { gateIndex } from "../../../src/waiting/gate.js";
import { fakeClock, fakeNodes } from "../support/fake-node.js";
import { resolvesOnFakeTime, run, useFakeTime } from "../support/fake-time.js";
import { seededRandom } from "../support/random.js";
import {
  acquireOnFakeTime,
  hotKey,
  nodesThatLearnedHolds,
  pollTimes,
  requestsTo,
} from "../support/waiting-scenarios.js";

useFakeTime();

describe("a hot key with default options", () => {
  it("8 clients over jittery nodes: no overlap, no failure, everyone served, fair turns", async () => {
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 2, jitterMs: 8 };
    const result = await hotKey(8, 10_000, nodes);
    expect(result.overlaps).toBe(0);
    expect(result.failures).toBe(0);
    expect(Math.min(...result.grants)).toBeGreaterThan(0);
    expect(result.jain).toBeGreaterThanOrEqual(0.8);
    // With 8 in line, the releaser should rarely be next.
    expect(result.repeatShare).toBeLessThan(0.3);
  });

  it("while the lock is held, the waiters poll the gate only: the other nodes see fan-outs, not polls", async () => {
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 2, jitterMs: 8 };
    const result = await hotKey(8, 5_000, nodes);
    const gate = gateIndex(["hot"], 5);
    const requests = nodes.map((n) => n.log.length);
    const others = requests.filter((_, i) => i !== gate);
    // Every grant needs a SET and a release on each node; polls go to the gate alone.
    expect(requests[gate]).toBeGreaterThan(Math.max(...others));
    for (const count of others) expect(count / result.total).toBeLessThan(4);
  });

  it("64 waiters on one key all acquire", async () => {
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 1, jitterMs: 4 };
    const grants = new Array<number>(64).fill(0);
    const acquisitions = Array.from({ length: 64 }, async (_, client) => {
      const redlock = new Redlock({ nodes, clock: fakeClock });
      const lock = await redlock.acquire("crowd", 5000);
      await new Promise((r) => setTimeout(r, 20));
      grants[client] = 1;
      await lock.release();
    });
    const results = await run(Promise.allSettled(acquisitions), 5, 120_000);
    expect(results.filter((r) => r.status === "rejected")).toEqual([]);
    expect(grants.every((g) => g === 1)).toBe(true);
  });

  it("before any hold is recorded, a line that forms at once polls in proportion to its places, not 10 times a second each", async () => {
    // 63 clients find the key held by a first holder that keeps it for a second: the gate has no
    // hold to predict from. A turn lasts at least a round trip, so a waiter k places back has
    // nothing to learn for k turns; polling every 100 ms whatever the place made a line of 64 send
    // 600 polls a second and slowed the handoffs it was waiting for.
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 20, jitterMs: 2 };
    const gate = nodes[gateIndex(["crowd"], 5)]!;
    const taking = new Redlock({ nodes, clock: fakeClock }).acquire("crowd", 5000);
    await vi.advanceTimersByTimeAsync(100);
    const first = await taking;
    const waiters = Array.from({ length: 63 }, async () => {
      const lock = await new Redlock({ nodes, clock: fakeClock }).acquire("crowd", 5000);
      await lock.release();
    });
    const before = gate.log.length;
    await vi.advanceTimersByTimeAsync(1000);
    const polls = gate.log.length - before - 63;
    // Then let the line drain quickly.
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 1, jitterMs: 1 };
    const released = first.release();
    await run(Promise.all([released, ...waiters]), 5, 120_000);
    // Requests to the gate beyond each waiter's first attempt, in one second of a hold nobody
    // could predict: about 4.5 per waiter here, 8.5 when every place polled every 100 ms.
    expect(polls / 63).toBeLessThan(6);
  });

  it("a long line does not poll its gate in bursts: the waiters far back do not all wake together", async () => {
    // 64 clients loop on one key with 50 ms holds, 20 ms from the nodes. Every waiter far back
    // reaches the longest sleep, and with one cap they all woke within the same few ms: in a
    // trace of the bench (64 clients, +20 ms) 35–60 polls within 100–200 ms, every second, and
    // the holder's requests and the handoff during such a burst took up to twice as long.
    // Jitter draws from Math.random: seeded, the run is the same every time. Over seeds 1-16 the
    // densest 50 ms held 7-12 polls; one unseeded run in CI saw 15.
    const draws = vi.spyOn(Math, "random").mockImplementation(seededRandom(1));
    onTestFinished(() => draws.mockRestore());
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 20 };
    const polls = pollTimes(nodes[gateIndex(["hot"], 5)]!);
    const start = Date.now();
    const result = await hotKey(64, 5_000, nodes, {}, 50);
    expect(result.overlaps).toBe(0);
    expect(result.failures).toBe(0);
    // Once the line has formed and learned its holds (after its first second), while it lasts:
    // the most polls within any 50 ms. About 10 here (3 on average); 19 with a single cap.
    const steady = polls.filter((at) => at >= start + 1_000 && at < start + 5_000);
    expect(steady.length).toBeGreaterThan(100);
    const densest = Math.max(...steady.map((from) => steady.filter((at) => at >= from && at < from + 50).length));
    expect(densest).toBeLessThan(15);
  });

  /** One waiter behind a holder that won the other nodes without the gate (see the test below), with seeded jitter. */
  async function outOfStep(seed: number): Promise<{ acquiredMs: number; gateRequests: number }> {
    // Jitter and backoff draw from Math.random: seeded, a run is the same whatever ran before.
    vi.spyOn(Math, "random").mockImplementation(seededRandom(seed));
    try {
      const nodes = fakeNodes(5);
      for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 2, jitterMs: 2 };
      // A line that teaches the gate how long the lock is held: 40 ms.
      await hotKey(3, 1_000, nodes, {}, 40);
      // Its clients leave; the places their last releases kept in line run out.
      await vi.advanceTimersByTimeAsync(3_000);
      const gate = gateIndex(["hot"], 5);
      // Someone holds the other nodes, not the gate, and lets go after 150 ms: longer than the
      // nodes are asked again after "held" when the gate is ours (at most 100 ms).
      nodes.forEach((n, i) => {
        if (i !== gate) n.occupy("hot", "won-without-the-gate", 150);
      });
      const started = Date.now();
      const gateRequestsBefore = nodes[gate]!.log.length;
      let gateRequests = 0;
      const acquiredAt = await acquireOnFakeTime(new Redlock({ nodes, clock: fakeClock }), "hot", 2000, () => {
        gateRequests = nodes[gate]!.log.length - gateRequestsBefore;
      });
      return { acquiredMs: acquiredAt - started, gateRequests };
    } finally {
      vi.mocked(Math.random).mockRestore();
    }
  }

  /** Three clients of one isolate acquire "hot" together (TTL 2 s, the defaults) and release at once: how each call ended. */
  async function threeWaiters(nodes: ReturnType<typeof fakeNodes>, fenced = false): Promise<string[]> {
    const outcomes: string[] = [];
    const waiters = Array.from({ length: 3 }, async () => {
      try {
        const options = { nodes, clock: fakeClock, onNodeError: () => {}, ...(fenced ? { fencing } : {}) };
        const lock = await new Redlock(options).acquire("hot", 2000);
        outcomes.push("acquired");
        await lock.release();
      } catch (error) {
        outcomes.push(String(error));
      }
    });
    await resolvesOnFakeTime(Promise.all(waiters), 30_000);
    return outcomes;
  }

  it("a waiter that took a gate out of step waits out its placeholder without polling it, and gets the lock soon after the holder lets go", async () => {
    // Per-node jitter lets a waiter win the other nodes while the gate still sees the previous
    // holder. The gate then frees up, the next waiter takes it, and its fan-out finds the others
    // held: it keeps its key on the gate as a placeholder, so that those behind it poll instead
    // of fanning out. The placeholder lasted a request deadline (1 s by default) whatever the
    // holds, and its owner, first in line, polled it every few milliseconds: in the bench at
    // C = 64 with jitter, runs where the line stood still for a second at 70-90 requests per
    // handoff.
    // The holder lets go 150 ms in; placeholders of two holds (40 ms each), then four, end by
    // about 250 ms; in about a third of the jitter's draws, a third placeholder (eight holds)
    // is taken too, and the lock comes at about 560 ms (seeds 2, 3, 5 and 12 of 1–12).
    const runs = [];
    for (let seed = 1; seed <= 12; seed++) runs.push(await outOfStep(seed));
    expect(runs.filter((r) => r.acquiredMs < 500).length).toBeGreaterThanOrEqual(8);
    for (const run of runs) {
      expect(run.acquiredMs).toBeLessThan(700);
      // Meanwhile the waiter did not poll its own placeholder: a few takes, a few polls.
      expect(run.gateRequests).toBeLessThan(15);
    }
  });

  it("waiters taking turns at a gate out of step lengthen one another's placeholders: behind a long hold, a few fan-outs and nobody gives up", async () => {
    // A holder won the other nodes without the gate (per-node jitter, or a gate that restarted
    // empty) and keeps the lock 5 s. A waiter that takes the gate finds the others held and leaves
    // a placeholder there, longer each time; the first in line behind it took that take for a hold
    // and aimed two takes at its predicted end, each a fan-out and an attempt, every time the
    // placeholder ran out and was taken again: with the default 10 attempts it gave up with
    // LockHeldError while the holder still had the lock. Placeholders also doubled only for the
    // waiter that left them, so waiters taking turns at the gate each started again from the first.
    const nodes = await nodesThatLearnedHolds();
    const gate = gateIndex(["hot"], 5);
    nodes.forEach((n, i) => {
      if (i !== gate) n.occupy("hot", "won-without-the-gate", 5_000);
    });
    const sets = () => requestsTo(nodes, (args) => args[0] === "SET");
    const setsBefore = sets();
    // SETs on the other nodes while the holder's keys last, per node and token.
    const outOfStepUntil = Date.now() + 5_000;
    const setsPerToken = new Map<string, number>();
    nodes.forEach((n, i) => {
      if (i === gate) return;
      n.onApplied = (args) => {
        if (args[0] !== "SET" || Date.now() >= outOfStepUntil) return;
        const key = `${i}:${String(args[2])}`;
        setsPerToken.set(key, (setsPerToken.get(key) ?? 0) + 1);
      };
    });
    // The default budget: with each take that found the gate free with no release costing N + 1
    // with its placeholder, two of the three gave up with RequestBudgetError.
    expect(await threeWaiters(nodes)).toEqual(["acquired", "acquired", "acquired"]);
    // Fan-outs (SET NX on the four other nodes): each waiter's first, two takes aimed at the
    // first placeholder, then the three grants. A take that finds the gate free with no release since the take before asks one other node
    // with a PTTL, and while that node still holds the key keeps its placeholder without a fan-out:
    // about 7 fan-outs in all (11 when each such take fanned out).
    expect((sets() - setsBefore) / 4).toBeLessThan(10);
    expect(requestsTo(nodes, (args) => args[0] === "PTTL")).toBeGreaterThanOrEqual(3);
    // While the holder's keys last, the gate's last release was seconds before every take: no
    // release was on its way to the other nodes, so none of them was asked again within an attempt
    // (one SET per token). Once they run out, the three hand the lock on among themselves, and a
    // take that lands a round trip after a release through the gate asks again, as it should.
    expect(setsPerToken.size).toBeGreaterThan(0);
    expect(Math.max(...setsPerToken.values())).toBe(1);
  });

  it("fenced waiters at a gate out of step keep placeholders too: behind a long hold won without the gate, nobody gives up", async () => {
    // As above, fenced. A fenced take after a poll that took the gate is a fenced attempt, 2N
    // requests; one that found the others held cleaned up everywhere, the gate included, so the
    // line took the gate again at once: a waiter could afford two such attempts in its budget
    // (CI's "fenced, 16 isolates" in request-budget.test.ts gave up that way now and then).
    const nodes = await nodesThatLearnedHolds();
    await run(initializeFencing(new Redlock({ nodes, clock: fakeClock, fencing })));
    const gate = gateIndex(["hot"], 5);
    nodes.forEach((n, i) => {
      if (i !== gate) n.occupy("hot", "won-without-the-gate", 5_000);
    });
    expect(await threeWaiters(nodes, true)).toEqual(["acquired", "acquired", "acquired"]);
    expect(requestsTo(nodes, (args) => args[0] === "PTTL")).toBeGreaterThanOrEqual(3);
  });

  it("a gate out of step with a node down: the line keeps its placeholders, and asks the nodes that answer", async () => {
    // As above, with the gate's neighbour down, so the holder has exactly a quorum. The vote of a
    // take is decided before the last "held" comes in: read from that moment, "held" on two of five
    // with a node down and one pending looked like an outage, the take's key on the gate was
    // released, and the line took the gate again at once, a fan-out each time: none of the three
    // was served within the default budget (13 fan-outs). The first node a take asks is one that
    // said "held" to the waiter's latest attempt, not the neighbour; and a placeholder that has
    // grown to the TTL the take set costs no request to shorten.
    vi.spyOn(Math, "random").mockImplementation(seededRandom(1));
    onTestFinished(() => vi.mocked(Math.random).mockRestore());
    const nodes = await nodesThatLearnedHolds();
    const gate = gateIndex(["hot"], 5);
    const down = (gate + 1) % 5;
    nodes[down]!.behaviour = { kind: "error" };
    nodes.forEach((n, i) => {
      if (i !== gate && i !== down) n.occupy("hot", "won-without-the-gate", 5_000);
    });
    // All three served within the default budget (the same over seeds 1-8), with 7 fan-outs: the
    // cluster check, the first fan-out and a cleanup release to the node that is down take 11 of a
    // waiter's 35 requests before it waits, and each placeholder after the first costs 2 or 3.
    expect(await threeWaiters(nodes)).toEqual(["acquired", "acquired", "acquired"]);
    const count = (n: (typeof nodes)[number], command: string) => n.log.filter((a) => a[0] === command).length;
    const others = nodes.filter((_, i) => i !== gate);
    expect(others.reduce((sum, n) => sum + count(n, "SET"), 0) / 4).toBeLessThanOrEqual(8);
    expect(count(nodes[down]!, "PTTL")).toBeLessThanOrEqual(1);
    expect(others.reduce((sum, n) => sum + count(n, "PTTL"), 0)).toBeGreaterThanOrEqual(4);
  });

  it("a caller that aborts while its take at a gate out of step asks another node leaves with the key its poll set", async () => {
    // The take's poll set our key on the gate; the abort lands while the PTTL is on its way. Left
    // there, that key would stand the line still for the TTL.
    const nodes = await nodesThatLearnedHolds();
    const gate = gateIndex(["hot"], 5);
    nodes.forEach((n, i) => {
      if (i !== gate) n.occupy("hot", "won-without-the-gate", 5_000);
    });
    const controller = new AbortController();
    let abortedAt = Number.POSITIVE_INFINITY;
    const view = nodes.map((n) => ({
      id: n.id,
      command(args: readonly RedisArgument[], signal: AbortSignal) {
        if (args[0] === "PTTL" && !controller.signal.aborted) {
          abortedAt = Date.now();
          controller.abort();
        }
        return n.command(args, signal);
      },
    }));
    let error: unknown;
    const acquiring = new Redlock({ nodes: view, clock: fakeClock })
      .acquire("hot", 2000, { signal: controller.signal })
      .catch((reason: unknown) => {
        error = reason;
      });
    expect(await resolvesOnFakeTime(acquiring, 10_000)).toBe(true);
    expect(error).toBeInstanceOf(AbortedError);
    expect(abortedAt).toBeLessThan(Number.POSITIVE_INFINITY);
    // Within a round trip or two of the abort (20 ms each way), the gate holds no key of ours.
    await vi.advanceTimersByTimeAsync(Math.max(0, abortedAt + 200 - Date.now()));
    expect(nodes[gate]!.get("hot")).toBeUndefined();
  });

  it("a take at a gate out of step whose shortening times out is never granted: the shortening may land after the grant", async () => {
    // The take's poll set our key on the gate for the TTL; the probe found the holder still there,
    // so the take asked the gate to shorten our key to a placeholder. That request timed out and
    // landed later. The take fanned out with the same token, counted the gate's key at the TTL, and
    // the late request cut it to the placeholder under the grant's claim: two nodes of five
    // backed it (the property test's seed -800364594).
    const nodes = await nodesThatLearnedHolds();
    const gate = gateIndex(["hot"], 5);
    const others = [1, 2, 3, 4].map((k) => (gate + k) % 5);
    // Two nodes stuck with a failed attempt's keys, two with a holder's that lets go soon: a
    // grant needs the gate.
    for (const i of others.slice(0, 2)) nodes[i]!.occupy("hot", "stuck", 1000);
    for (const i of others.slice(2)) nodes[i]!.occupy("hot", "won-without-the-gate", 150);
    // The first request that shortens a key on the gate after a probe (a PTTL) lands 300 ms after
    // it was sent, past the 200 ms request deadline of a 2 s TTL; every other message takes 10 ms
    // each way.
    let probed = false;
    for (const n of nodes)
      n.onApplied = (args) => {
        if (args[0] === "PTTL") probed = true;
      };
    let delayed = 0;
    nodes[gate]!.latency = (args) =>
      probed && args[0] === "EVALSHA" && args[1] === extendScript.sha1 && delayed++ === 0
        ? { requestMs: 300, replyMs: 10 }
        : { requestMs: 10, replyMs: 10 };
    const grants: { token: string; until: number }[] = [];
    const acquiring = new Redlock({ nodes, clock: fakeClock, onNodeError: () => {} })
      .acquire("hot", 2000)
      .then((lock) => grants.push({ token: lock.token, until: Date.now() + lock.remainingMs() }));
    expect(await resolvesOnFakeTime(acquiring, 10_000)).toBe(true);
    expect(delayed).toBeGreaterThanOrEqual(1);
    const [grant] = grants;
    // Until the claim ends, a quorum holds the token (read in 5 ms steps from the nodes' keys).
    const short: number[] = [];
    while (Date.now() < grant!.until) {
      const holders = nodes.filter((n) => n.get("hot") === grant!.token).length;
      if (holders < 3) short.push(holders);
      await vi.advanceTimersByTimeAsync(Math.min(5, grant!.until - Date.now()));
    }
    expect(short).toEqual([]);
  });

  it('two clusters with the same node ids, the resource "a\\nb", the gate out of step on one: each cluster\'s probes ask its own nodes, for its own key', async () => {
    // Cluster 0's line learned holds of another key; a holder won its other nodes without the gate. Cluster 1
    // (nodes with the same ids, one isolate, the same clock) has a plain holder of "a\nb" in step.
    // Every grant must be backed by its own cluster, and the PTTLs go to cluster 0 only.
    const first = await nodesThatLearnedHolds();
    const second = fakeNodes(5);
    const gate = gateIndex(["a\nb"], 5);
    first.forEach((n, i) => {
      if (i !== gate) n.occupy("a\nb", "won-without-the-gate", 3_000);
    });
    for (const n of second) n.occupy("a\nb", "in-step", 1_000);
    const pttls = (nodes: typeof first) => nodes.flatMap((n) => n.log.filter((a) => a[0] === "PTTL").map((a) => a[1]));
    const unbacked: string[] = [];
    const callers = [first, first, first, second, second].map(async (nodes, k) => {
      const lock = await new Redlock({ nodes, clock: fakeClock }).acquire("a\nb", 2000);
      for (const other of [first, second]) {
        const backed = other.filter((n) => n.get("a\nb") === lock.token).length;
        if ((other === nodes) !== backed >= 3) unbacked.push(`caller ${k}: ${backed} nodes`);
      }
      await lock.release();
      await lock.release();
    });
    expect(await resolvesOnFakeTime(Promise.all(callers), 30_000)).toBe(true);
    expect(unbacked).toEqual([]);
    expect(pttls(second)).toEqual([]);
    expect(pttls(first).length).toBeGreaterThan(0);
    expect(new Set(pttls(first))).toEqual(new Set(["a\nb"]));
  });

  it("before any hold is recorded, a gate out of step stands the line still for a few round trips, not a request deadline", async () => {
    // A line forming under per-node jitter: a client won the other nodes but not the gate, and
    // lets go 150 ms later. A waiter takes the empty gate and finds the others held: its
    // placeholder lasted a request deadline (1 s with this 10 s TTL) when no hold was recorded
    // yet, and the whole line stood still behind it (waiters with 0.9 s of patience gave up in
    // the bench).
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 2 };
    const gate = gateIndex(["fresh"], 5);
    nodes.forEach((n, i) => {
      if (i !== gate) n.occupy("fresh", "won-without-the-gate", 150);
    });
    const started = Date.now();
    const acquiredAt = await acquireOnFakeTime(new Redlock({ nodes, clock: fakeClock }), "fresh", 10_000);
    // The holder let go at 150 ms; a first placeholder of 200 ms (four round trips, at least
    // 200 ms) ends before 300 ms.
    expect(acquiredAt - started).toBeLessThan(500);
  });

  it("a waiter far back in a moving line does not give up, though its sleep outlasts its patience", async () => {
    // Patience without progress: 9 backoff ceilings of 100 ms. A waiter 31st in line sleeps
    // longer than that between polls; it must look again before giving up.
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 2, jitterMs: 2 };
    const result = await hotKey(32, 6_000, nodes, { maxAttempts: 10, retryBaseDelayMs: 100, retryMaxDelayMs: 100 }, 60);
    expect(result.errors).toEqual([]);
    expect(result.overlaps).toBe(0);
  });
});

describe("overlapping resource sets", () => {
  /** 8 clients, half looping over ["a", "b"], half over ["b", "c"], for 20 s of fake time. */
  async function overlappingSets(seed: number) {
    // Backoff draws come from Math.random: a seeded generator makes each run repeatable.
    vi.spyOn(Math, "random").mockImplementation(seededRandom(seed));
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 20, jitterMs: 0 };
    const sets = [
      ["a", "b"],
      ["b", "c"],
    ];
    const grants = [0, 0];
    const holders = new Map<string, number>();
    let overlaps = 0;
    const end = Date.now() + 20_000;
    const loops = Array.from({ length: 8 }, async (_, client) => {
      const set = client % 2;
      const keys = sets[set] as string[];
      const redlock = new Redlock({ nodes, clock: fakeClock });
      while (Date.now() < end) {
        try {
          const lock = await redlock.acquire(keys, 2000);
          for (const key of keys) {
            holders.set(key, (holders.get(key) ?? 0) + 1);
            if ((holders.get(key) ?? 0) > 1) overlaps++;
          }
          await new Promise((r) => setTimeout(r, 40));
          for (const key of keys) holders.set(key, (holders.get(key) ?? 1) - 1);
          grants[set] = (grants[set] ?? 0) + 1;
          await lock.release();
        } catch (error) {
          // Giving up after the attempts, or at the request budget (held elsewhere throughout),
          // is allowed: call again.
          if (!(error instanceof LockHeldError || error instanceof RequestBudgetError)) throw error;
        }
      }
    });
    try {
      await run(Promise.all(loops), 5, 80_000);
    } finally {
      vi.mocked(Math.random).mockRestore();
    }
    const [ab = 0, bc = 0] = grants;
    return { smaller: Math.min(ab, bc), total: ab + bc, overlaps };
  }

  it("sets that share a key ([a, b] and [b, c]) both make progress, and no key ever has two holders", async () => {
    // Each set has its own gate and line, and neither line sees the other's releases. Before, the
    // line whose takes were aimed at its own releases kept the shared key: here the other set got
    // 5 of 329 grants in 20 s (1.5 %), and 0–3 % in some runs of the bench on real nodes. A waiter
    // whose gate shows its keys partly held now leaves the line for fan-outs with backoff, and so
    // do that gate's other waiters for the next 2 s.
    const runs = [];
    for (const seed of [1, 2, 3]) runs.push(await overlappingSets(seed));
    for (const run of runs) {
      expect(run.overlaps).toBe(0);
      expect(run.total).toBeGreaterThan(200);
    }
    const share = runs.reduce((sum, r) => sum + r.smaller, 0) / runs.reduce((sum, r) => sum + r.total, 0);
    expect(share).toBeGreaterThanOrEqual(0.1);
  });
});
