/** A release handing the lock over to the first in line of its isolate, on fake time (see src/handoff.ts). */
import { describe, expect, it, vi } from "vitest";
import { AbortedError, type Lock, Redlock } from "../../../src/index.js";
import { gateIndex } from "../../../src/waiting/gate.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";
import { type FakeNode, fakeClock } from "../support/fake-node.js";
import { resolvesOnFakeTime, useFakeTime } from "../support/fake-time.js";
import {
  failingOnce,
  handedOn,
  inAnotherIsolate,
  nodesThatLearnedHolds,
  nodesWithGate,
  requestsTo,
  twoInTurn,
} from "../support/waiting-scenarios.js";

useFakeTime();

describe("a release in the same isolate", () => {
  /**
   * A holds "k" on nodes that run each command 20 ms after it is sent and answer at once; B waits
   * first in line behind it, with no hold recorded yet. A releases 300 ms in. (A's client sees the
   * nodes as another isolate does when `sameIsolate` is false.)
   */
  /** A holds the lock for `holdMs` of its 2 s TTL, B waits first in line; then A releases. */
  async function releaseWithFirstInLine(sameIsolate: boolean, bSignal?: AbortSignal, holdMs = 300) {
    const { nodes } = nodesWithGate(20);
    const a = new Redlock({ nodes: sameIsolate ? nodes : inAnotherIsolate(nodes), clock: fakeClock });
    const b = new Redlock({ nodes, clock: fakeClock });
    const aAcquiring = a.acquire("k", 2000);
    await vi.advanceTimersByTimeAsync(20);
    const aLock = await aAcquiring;
    const grant: { at: number; lock?: Lock; requestsBefore: number; error?: unknown } = {
      at: Number.NaN,
      requestsBefore: 0,
    };
    const bTurn = b.acquire("k", 2000, { signal: bSignal }).then(
      (lock) => {
        grant.at = Date.now();
        grant.lock = lock;
        grant.requestsBefore = requestsTo(nodes);
      },
      (error: unknown) => {
        grant.error = error;
      },
    );
    await vi.advanceTimersByTimeAsync(holdMs);
    const releasedAt = Date.now();
    const requestsAtRelease = requestsTo(nodes);
    const released = aLock.release();
    return { nodes, aLock, released, bTurn, grant, releasedAt, requestsAtRelease };
  }

  it("hands the next holder a token of its own: a second release and a late extension with the old token touch nothing", async () => {
    // A held 50 ms of its 2 s TTL, so most of its validity is left. The release's requests still
    // set B's own token where they delete A's: the old token ends with A's hold.
    const handed = await releaseWithFirstInLine(true, undefined, 50);
    expect(await resolvesOnFakeTime(Promise.all([handed.released, handed.bTurn]), 5_000)).toBe(true);
    const { aLock, nodes } = handed;
    const lock = handed.grant.lock as Lock;
    expect(lock.token).not.toBe(aLock.token);
    for (const node of nodes) expect(node.get("k"), node.id).toBe(lock.token);
    // A second release sends nothing and returns the first one's result.
    const requests = requestsTo(nodes);
    const again = aLock.release();
    expect(await resolvesOnFakeTime(again, 1_000)).toBe(true);
    expect(await again).toBe(await handed.released);
    expect(requestsTo(nodes)).toBe(requests);
    // The old token, by token from another client: extends and releases nothing of B's.
    const other = new Redlock({ nodes: inAnotherIsolate(nodes), clock: fakeClock, maxAttempts: 1 });
    const extending = other.extend("k", aLock.token, 60_000).catch((error: unknown) => error);
    expect(await resolvesOnFakeTime(extending, 1_000)).toBe(true);
    expect(await extending).toBeInstanceOf(Error);
    const releasing = other.release("k", aLock.token);
    expect(await resolvesOnFakeTime(releasing, 1_000)).toBe(true);
    expect((await releasing).released).toBe(0);
    for (const node of nodes) expect(node.get("k"), node.id).toBe(lock.token);
    expect(Math.min(...nodes.map((n) => n.gateStore.pttl("k")))).toBeGreaterThanOrEqual(lock.remainingMs());
    expect(lock.remainingMs()).toBeLessThanOrEqual(2000);
    expect(await resolvesOnFakeTime(lock.release(), 5_000)).toBe(true);
    for (const node of nodes) expect(node.get("k")).toBeUndefined();
  });

  it("a lock whose SET on the gate was applied but not answered is handed over to keys the gate takes too", async () => {
    // A's SET on the gate was applied but its answer lost: A holds the lock on the other four, and
    // does not know of the gate. Its release hands the lock over with B's own token, which the
    // gate takes too: the gate does not stay out of step with the lock.
    const { nodes, gate } = nodesWithGate(20);
    const flaky = failingOnce(gate, (args) => args[0] === "SET", true);
    const { aLock, bLock } = await twoInTurn(
      nodes.map((n) => (n === gate ? flaky.node : n)),
      2000,
      async (lock) => {
        expect(flaky.failures()).toBe(1);
        expect(gate.get("k")).toBe(lock.token);
      },
    );
    expect(bLock.token).not.toBe(aLock.token);
    for (const node of nodes) expect(node.get("k"), node.id).toBe(bLock.token);
    expect(await resolvesOnFakeTime(bLock.release(), 5_000)).toBe(true);
  });
  it("hands the lock over to the first in line there: the release's own requests set its keys, a round trip sooner", async () => {
    // The release's requests delete A's key and set B's in one script per node: B holds the lock
    // when their answers are back, 20 ms after the release was sent, with no request of its own.
    // Without the hand-over (A in another isolate), B finds the lock free at its next poll and
    // takes it in a round trip of its own after that.
    const handed = await releaseWithFirstInLine(true);
    expect(await resolvesOnFakeTime(Promise.all([handed.released, handed.bTurn]), 5_000)).toBe(true);
    const { grant, nodes } = handed;
    expect(grant.at - handed.releasedAt).toBe(20);
    expect(grant.requestsBefore - handed.requestsAtRelease).toBe(5);
    expect((await handed.released).released).toBeGreaterThanOrEqual(3);
    // The nodes hold B's token, for at least as long as B's lock claims.
    const lock = grant.lock as Lock;
    for (const node of nodes) expect(node.get("k")).toBe(lock.token);
    expect(Math.min(...nodes.map((n) => n.gateStore.pttl("k")))).toBeGreaterThanOrEqual(lock.remainingMs());
    expect(await resolvesOnFakeTime(lock.release(), 5_000)).toBe(true);

    const waited = await releaseWithFirstInLine(false);
    expect(await resolvesOnFakeTime(Promise.all([waited.released, waited.bTurn]), 5_000)).toBe(true);
    expect(waited.grant.at - waited.releasedAt).toBeGreaterThan(40);
    expect(waited.grant.requestsBefore - waited.requestsAtRelease).toBeGreaterThan(5);
  });

  it("the first in line behind a holder of its own isolate waits for the hand-over instead of aiming a take at the release", async () => {
    // The gate has learned 50 ms holds, so a first in line aims a take at the predicted release;
    // this holder keeps the lock 120 ms. When it is in the waiter's isolate, the take would only
    // race the hand-over: none is sent, and a node other than the gate sees the release's
    // hand-over and no SET from the waiter.
    const setsWhileWaiting = async (sameIsolate: boolean) => {
      const nodes = await nodesThatLearnedHolds();
      const other = nodes[(gateIndex(["hot"], 5) + 1) % 5] as FakeNode;
      const a = new Redlock({ nodes: sameIsolate ? nodes : inAnotherIsolate(nodes), clock: fakeClock });
      const b = new Redlock({ nodes, clock: fakeClock });
      const aAcquiring = a.acquire("hot", 2000);
      await vi.advanceTimersByTimeAsync(20);
      const aLock = await aAcquiring;
      const from = other.log.length;
      let bLock: Lock | undefined;
      const bTurn = b.acquire("hot", 2000).then((lock) => {
        bLock = lock;
      });
      await vi.advanceTimersByTimeAsync(120);
      expect(await resolvesOnFakeTime(Promise.all([aLock.release(), bTurn]), 5_000)).toBe(true);
      const since = other.log.slice(from);
      expect(other.get("hot")).toBe(bLock?.token);
      return {
        sets: since.filter((args) => args[0] === "SET").length,
        handOvers: handedOn(since),
      };
    };
    expect(await setsWhileWaiting(true)).toEqual({ sets: 0, handOvers: 1 });
    // The holder in another isolate: the waiter's take, aimed at the release, sets the key.
    expect(await setsWhileWaiting(false)).toMatchObject({ handOvers: 0 });
    expect((await setsWhileWaiting(false)).sets).toBeGreaterThanOrEqual(1);
  });

  it("a waiter further back learns from a release in its isolate that it is now first in line, without a poll", async () => {
    // The gate has learned 50 ms holds. A holds; B and C wait behind it, first and second. A's
    // release hands the lock over to B, and the gate's answer to it names C's ticket as first in
    // line now: C offers its token for B's release at once, and sends no poll while B holds the
    // lock, where it used to poll to learn its place and then whether B was done.
    const gatePollsAfterARelease = async (sameIsolate: boolean) => {
      const nodes = await nodesThatLearnedHolds();
      const gate = nodes[gateIndex(["hot"], 5)] as FakeNode;
      const [a, b, c] = [0, 1, 2].map(
        () => new Redlock({ nodes: sameIsolate ? nodes : inAnotherIsolate(nodes), clock: fakeClock }),
      ) as [Redlock, Redlock, Redlock];
      const aAcquiring = a.acquire("hot", 2000);
      await vi.advanceTimersByTimeAsync(20);
      const aLock = await aAcquiring;
      const grants: string[] = [];
      const gateLogAt = new Map<string, number>();
      const hold = (name: string) => async (lock: Lock) => {
        grants.push(name);
        gateLogAt.set(name, gate.log.length);
        await new Promise((r) => setTimeout(r, 50));
        await lock.release();
      };
      const bTurn = b.acquire("hot", 2000).then(hold("b"));
      await vi.advanceTimersByTimeAsync(30);
      const cTurn = c.acquire("hot", 2000).then(hold("c"));
      await vi.advanceTimersByTimeAsync(100);
      expect(await resolvesOnFakeTime(Promise.all([aLock.release(), bTurn, cTurn]), 5_000)).toBe(true);
      expect(grants).toEqual(["b", "c"]);
      // Polls of the gate sent while B held the lock.
      return gate.log
        .slice(gateLogAt.get("b"), gateLogAt.get("c"))
        .filter((args) => args[0] === "EVALSHA" && args[1] === gateScript.sha1).length;
    };
    expect(await gatePollsAfterARelease(true)).toBe(0);
    // Each client in an isolate of its own: nothing is handed over, and C polls to learn its turn.
    expect(await gatePollsAfterARelease(false)).toBeGreaterThan(0);
  });

  it("the first in line waiting for a hand-over keeps its place in line, however long its isolate's holder keeps the lock", async () => {
    // A holds "k" (TTL 10 s) for 5 s; B, in A's isolate, is first in line and waits for A's
    // release to hand it over; C, in another isolate, waits behind B. A place in line lasts a few
    // seconds after its last poll: B must poll again before its place runs out, or the gate puts
    // C first, refuses A's hand-over to B while the other nodes carry it out, and B holds the
    // lock without the gate (the line then waits for a placeholder).
    const { nodes, gate } = nodesWithGate(20);
    const a = new Redlock({ nodes, clock: fakeClock });
    const b = new Redlock({ nodes, clock: fakeClock });
    const c = new Redlock({ nodes: inAnotherIsolate(nodes), clock: fakeClock });
    const aAcquiring = a.acquire("k", 10_000);
    await vi.advanceTimersByTimeAsync(20);
    const aLock = await aAcquiring;
    let gateHeldByB: boolean | undefined;
    const bTurn = b.acquire("k", 10_000).then(async (lock) => {
      // Granted at the quorum; the gate's answer may still be on its way.
      await new Promise((r) => setTimeout(r, 30));
      gateHeldByB = gate.get("k") === lock.token;
      await lock.release();
    });
    await vi.advanceTimersByTimeAsync(100);
    const cTurn = c.acquire("k", 10_000).then((lock) => lock.release());
    await vi.advanceTimersByTimeAsync(5_000);
    expect(await resolvesOnFakeTime(Promise.all([aLock.release(), bTurn, cTurn]), 20_000)).toBe(true);
    expect(gateHeldByB).toBe(true);
  });

  it("a waiter that gives up as the release hands it the lock leaves nothing behind on the nodes", async () => {
    const controller = new AbortController();
    const handed = await releaseWithFirstInLine(true, controller.signal);
    // The release has sent its requests (they set B's keys 20 ms later); B gives up at once.
    controller.abort(new Error("gave up"));
    expect(await resolvesOnFakeTime(Promise.all([handed.released, handed.bTurn]), 5_000)).toBe(true);
    expect(handed.grant.error).toBeInstanceOf(AbortedError);
    expect((await handed.released).released).toBeGreaterThanOrEqual(3);
    // B's attempt undid what the hand-over set: the key is free on every node long before its TTL.
    await vi.advanceTimersByTimeAsync(200);
    for (const node of handed.nodes) expect(node.get("k")).toBeUndefined();
  });

  it("a waiter of another isolate still gets turns while the line hands the lock from release to release", async () => {
    // 6 clients in one isolate, and a client of another isolate that waits for the same key in
    // the gate's line. A release hands the lock over only to a waiter of its isolate that the gate
    // has first in line; a client coming back for the lock stands at the back with a kept place,
    // so the other isolate's waiter comes first once per round of the line and gets about a line
    // member's share.
    const { nodes } = nodesWithGate(20);
    let outsiderGrants = 0;
    let lineGrants = 0;
    let holders = 0;
    let overlaps = 0;
    const hold = async (lock: Lock) => {
      if (++holders > 1) overlaps++;
      await new Promise((r) => setTimeout(r, 60));
      holders--;
      await lock.release();
    };
    const end = Date.now() + 6_000;
    const line = Array.from({ length: 6 }, async () => {
      const client = new Redlock({ nodes, clock: fakeClock });
      while (Date.now() < end) {
        await hold(await client.acquire("k", 2000));
        lineGrants++;
      }
    });
    const outsider = (async () => {
      const client = new Redlock({ nodes: inAnotherIsolate(nodes), clock: fakeClock, maxAttempts: 10_000 });
      while (Date.now() < end) {
        await hold(await client.acquire("k", 2000));
        outsiderGrants++;
      }
    })();
    expect(await resolvesOnFakeTime(Promise.all([...line, outsider]), 20_000)).toBe(true);
    expect(overlaps).toBe(0);
    expect(lineGrants).toBeGreaterThan(40);
    // Most turns were handed over (a node other than the gate saw a hand-over for them)...
    const other = nodes[(gateIndex(["k"], 5) + 1) % 5] as FakeNode;
    expect(handedOn(other.log)).toBeGreaterThan((lineGrants + outsiderGrants) / 2);
    // ...and the outsider had at least half a line member's share.
    expect(outsiderGrants).toBeGreaterThanOrEqual(Math.floor(lineGrants / 12));
  });
});
