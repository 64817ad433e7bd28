/**
 * Waiting in line behind holders that keep the lock long, die, or never let go, and gates that
 * fail: what it costs in requests, and when a waiter gives up.
 */
import { describe, expect, it, vi } from "vitest";
import { AbortedError, type Lock, LockHeldError, type RedisNode, Redlock } from "../../../src/index.js";
import type { RedisReply } from "../../../src/transport/rest.js";
import { gateIndex, pollGate } from "../../../src/waiting/gate.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";
import { gateReleaseScript } from "../../../src/waiting/scripts/gate-release.js";
import { fakeClock, fakeNodes } from "../support/fake-node.js";
import { resolvesOnFakeTime, run, useFakeTime } from "../support/fake-time.js";
import {
  failingOnce,
  inAnotherIsolate,
  longHoldInLine,
  nodesThatLearnedHolds,
  nodesWithGate,
  requestsTo,
} from "../support/waiting-scenarios.js";

useFakeTime();

describe("giving up in line", () => {
  it("a holder that keeps the lock far longer than the line's usual hold costs each waiter about 10 polls a second, not one every few ms", async () => {
    // A line learns holds of 50 ms; then one holder keeps the lock for 3 s (its work took longer,
    // or it died and its key runs out). The gate's prediction has passed, so the first in line and
    // the waiters behind it polled at the pace of a 50 ms hold (every ~6 ms): the 3 waiters sent
    // about 250 requests in those 3 s, 28 per waiter per second, 5 times the subrequests a Workers
    // invocation may make.
    const { errors, overlaps, turns, perWaiterPerSecond } = await longHoldInLine();
    expect(errors.map(String)).toEqual([]);
    expect(overlaps).toBe(0);
    expect(turns).toBeGreaterThanOrEqual(40);
    // About 10 a second at most once the overdue time passes 200 ms, a few more before.
    expect(perWaiterPerSecond).toBeLessThan(14);
  });

  it("behind a holder whose hold cannot be predicted (it won without the gate, with a longer TTL, and died), the first in line polls at most 10 times a second", async () => {
    // A line learns holds of 50 ms with 2 s keys; then a client takes the lock by a plain fan-out
    // with a 10 s key and dies. The gate cannot tell how long it has held it, and the first in
    // line polled it at the pace of the usual hold (every ~6 ms): the two waiters sent 182 requests
    // each before the key ran out, nearly four Workers invocations' budgets of subrequests.
    const nodes = await nodesThatLearnedHolds();
    const dead = new Redlock({ nodes, clock: fakeClock });
    const deadLock = dead.acquire("hot", 10_000);
    await vi.advanceTimersByTimeAsync(200);
    await deadLock;
    const before = requestsTo(nodes);
    const started = Date.now();
    const grants: number[] = [];
    const waiters = Array.from({ length: 2 }, async () => {
      const lock = await new Redlock({ nodes, clock: fakeClock, acquireTimeoutMs: 30_000 }).acquire("hot", 2000);
      grants.push(Date.now() - started);
      await lock.release();
    });
    expect(await resolvesOnFakeTime(Promise.all(waiters), 30_000)).toBe(true);
    // The first waiter gets the lock once the dead holder's key runs out (~9.8 s from here).
    expect(Math.min(...grants)).toBeGreaterThan(9_000);
    expect(Math.min(...grants)).toBeLessThan(11_500);
    // About 70 each now: 10 polls a second for the first in line, fewer behind it.
    const perWaiter = (requestsTo(nodes) - before) / 2;
    expect(perWaiter).toBeLessThan(100);
  });

  it("a holder that extends its lock (a long job under using()) is past the prediction too: no take aimed at each extension", async () => {
    // The same 3 s hold, extended every 500 ms. The gate counted a hold by the key's PTTL, which
    // each extension resets: every extension made the hold look fresh, the first in line aimed a
    // fan-out at a release that was not coming (and sent it once more on finding it early), and
    // with the default 10 attempts a waiter gave up with LockHeldError while the line was moving.
    const { errors, overlaps, turns, perWaiterPerSecond, holderRequests } = await longHoldInLine(500);
    expect(errors.map(String)).toEqual([]);
    expect(overlaps).toBe(0);
    expect(turns).toBeGreaterThanOrEqual(40);
    // The holder's own extensions (6 of one request per node), not counted as the waiters'.
    expect(holderRequests).toBe(30);
    expect(perWaiterPerSecond).toBeLessThan(14);
  });

  it("a gate that timed out once and then answers slower than the other nodes brings the waiter back into line", async () => {
    // The gate hangs for a moment (one poll times out: plain fan-outs take over), then answers,
    // 40 ms behind the other nodes. Each fan-out's vote is decided by the others' "held" before
    // the gate's answer arrives, so the gate read as pending, and pending never brought the
    // waiter back: it fanned out until its attempts ran out and gave up with LockHeldError while
    // the holder still held (under load, the chaos hot-key scenario's waiters did the same).
    // The backoff's full jitter at its midpoint, so that the count of fan-outs does not depend on
    // the draw (with small draws, a few more fan-outs fit before the gate's first late answer).
    vi.spyOn(Math, "random").mockReturnValue(0.5);
    const nodes = fakeNodes(5);
    const gate = gateIndex(["hot"], 5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 5 };
    const holding = new Redlock({ nodes, clock: fakeClock }).acquire("hot", 10_000);
    await vi.advanceTimersByTimeAsync(50);
    const holder = await holding;
    nodes[gate]!.behaviour = { kind: "hang" };
    setTimeout(() => {
      nodes[gate]!.behaviour = { kind: "ok", latencyMs: 45 };
    }, 300);
    setTimeout(() => void holder.release(), 6_000);
    let fanOuts = 0;
    const waiter = new Redlock({
      nodes,
      clock: fakeClock,
      requestTimeoutMs: 200,
      onAttempt: (report) => {
        if (report.operation === "acquire") fanOuts++;
      },
    });
    let error: unknown;
    const waiting = waiter.acquire("hot", 2000).then(
      (lock) => lock.release(),
      (e) => {
        error = e;
      },
    );
    try {
      expect(await resolvesOnFakeTime(waiting, 20_000)).toBe(true);
    } finally {
      vi.mocked(Math.random).mockRestore();
    }
    expect(error).toBeUndefined();
    // 10 (all its attempts) before; now 4: the first, one after the timed-out poll (the gate
    // answers it late), and the take.
    expect(fanOuts).toBeLessThanOrEqual(4);
  });

  it("a client that went straight to the line gets a LockHeldError when the holder never lets go", async () => {
    const nodes = fakeNodes(5);
    const redlock = new Redlock({ nodes, clock: fakeClock, maxAttempts: 3, retryBaseDelayMs: 50, retryMaxDelayMs: 50 });
    for (const n of nodes) n.occupy("stuck");
    const outcomes: unknown[] = [];
    // The first call waits in line and marks the key hot; the second queues up at once.
    for (let i = 0; i < 2; i++) {
      const attempt = redlock.acquire("stuck", 1000).then(
        () => "acquired",
        (error: unknown) => error,
      );
      await resolvesOnFakeTime(attempt, 30_000);
      outcomes.push(await attempt);
    }
    for (const outcome of outcomes) expect(outcome).toBeInstanceOf(LockHeldError);
  });

  it("behind a holder that never lets go, waiters giving up ahead of a waiter do not restart its patience", async () => {
    // Patience: 9 backoff ceilings of 100 ms. If every departure ahead counted as the line moving,
    // the 10th waiter would wait about ten times as long.
    const nodes = fakeNodes(5);
    for (const n of nodes) n.occupy("stuck-line");
    const options = { nodes, clock: fakeClock, maxAttempts: 10, retryBaseDelayMs: 100, retryMaxDelayMs: 100 };
    const started = Date.now();
    const endings: { at: number; error: unknown }[] = [];
    // They come one by one, 300 ms apart, so each sees the ones ahead of it leave.
    const waiters = Array.from({ length: 10 }, (_, i) =>
      new Promise((r) => setTimeout(r, 300 * i)).then(() =>
        new Redlock(options).acquire("stuck-line", 1000).then(
          () => endings.push({ at: Date.now(), error: undefined }),
          (error: unknown) => endings.push({ at: Date.now(), error }),
        ),
      ),
    );
    await resolvesOnFakeTime(Promise.all(waiters), 60_000);
    expect(endings).toHaveLength(10);
    for (const { error } of endings) expect(error).toBeInstanceOf(LockHeldError);
    // The last comes at 2.7 s and has 0.9 s of patience (and a last look).
    expect(Math.max(...endings.map((e) => e.at)) - started).toBeLessThan(5000);
  });

  it("a client that waited keeps a place in line with its release, and comes back without a poll to join", async () => {
    const { nodes, gate } = nodesWithGate(1);
    const a = new Redlock({ nodes, clock: fakeClock });
    const b = new Redlock({ nodes, clock: fakeClock });
    /** Until `work` settles, 1 ms at a time. */
    const settled = <T>(work: Promise<T>): Promise<T> => run(work, 1, 10_000);
    // B holds; A waits for it (A now waits for this key: it is hot for A).
    const first = await settled(b.acquire("k", 2000));
    const aWaits = a.acquire("k", 2000);
    await settled(new Promise((r) => setTimeout(r, 40)));
    await settled(first.release());
    const aLock = await settled(aWaits);
    // B comes back and waits in line behind A.
    const bWaits = b.acquire("k", 2000);
    await settled(new Promise((r) => setTimeout(r, 40)));
    const before = gate.log.length;
    await settled(aLock.release());
    const release = gate.log.slice(before).find((args) => args[0] === "EVALSHA" && args[1] === gateReleaseScript.sha1);
    // EVALSHA, sha, 4 keys (the lock's and the gate's 3), then ARGV: token, n, TTL, the kept
    // place's waiter id (ARGV[4]), its lease, the hold's lead, and the token, TTL and waiter id
    // (ARGV[9]) of a hand-over.
    const argv = (args: readonly unknown[] | undefined, i: number) => String(args?.[2 + 4 + i]);
    const place = argv(release, 4);
    expect(place.length).toBeGreaterThan(8);
    // A comes back at once: no poll to join the line (without a kept place, a client coming back
    // for a hot key polls the gate at once); it sleeps from the place its release made.
    const pollsSince = (from: number) =>
      gate.log.slice(from).filter((args) => args[0] === "EVALSHA" && args[1] === gateScript.sha1);
    const comeBack = gate.log.length;
    const waiterOf = (args: readonly unknown[]) => String(args[3 + 4]);
    const known = new Set(pollsSince(0).map(waiterOf));
    const aAgain = a.acquire("k", 2000);
    await vi.advanceTimersByTimeAsync(3);
    expect(pollsSince(comeBack).filter((args) => !known.has(waiterOf(args)))).toEqual([]);
    const bLock = await settled(bWaits);
    const bReleasing = gate.log.length;
    await settled(bLock.release());
    const again = await settled(aAgain);
    // A stood first in line in the kept place, and B's release handed the lock over to it there
    // (ARGV[9]: the waiter id it hands over to). A sent no poll with a new waiter id.
    const bRelease = gate.log
      .slice(bReleasing)
      .find((args) => args[0] === "EVALSHA" && args[1] === gateReleaseScript.sha1);
    expect(argv(bRelease, 9)).toBe(place);
    expect(gate.get("k")).toBe(again.token);
    const fresh = new Set(
      pollsSince(comeBack)
        .map(waiterOf)
        .filter((waiter) => !known.has(waiter)),
    );
    expect([...fresh].filter((waiter) => waiter !== place)).toEqual([]);
    await settled(again.release());
  });

  it("a hold taken by a poll is learned without the round trip to the other nodes that followed the take", async () => {
    // Each node runs a command 20 ms after it is sent and answers at once. A poll takes the gate
    // at T and answers at T; the other nodes take at T + 20, the grant: the gate was ours 20 ms
    // before the lock was. A 100 ms hold's release reaches the gate at T + 140. A take aimed at
    // the release asks the others in the same round trip: held from T to T + 120, the hold the
    // next waiter plans by. (Learned as 140 ms, the next first in line aimed 20 ms late.)
    const { nodes, gate } = nodesWithGate(20);
    // A in another isolate: its release does not wake B, which takes by a poll.
    const a = new Redlock({ nodes: inAnotherIsolate(nodes), clock: fakeClock });
    const b = new Redlock({ nodes, clock: fakeClock });
    // A holds (a plain fan-out: its hold teaches nothing); B fails, then waits in line.
    const aAcquiring = a.acquire("k", 2000);
    await vi.advanceTimersByTimeAsync(20);
    const aLock = await aAcquiring;
    let bLock: Lock | undefined;
    const bTurn = (async () => {
      bLock = await b.acquire("k", 2000);
      await new Promise((r) => setTimeout(r, 100));
      await bLock.release();
    })();
    await vi.advanceTimersByTimeAsync(200);
    const aReleased = aLock.release();
    expect(await resolvesOnFakeTime(Promise.all([aReleased, bTurn]), 5_000)).toBe(true);
    expect(bLock?.gateLeadMs).toBe(20);
    const look = pollGate(
      gate,
      aLock.keys,
      { waiter: "c", mode: "wait", token: "-", ttlMs: 2000, leaseMs: 1, ticket: 0 },
      { signal: new AbortController().signal, countRequest() {} },
    );
    expect(await resolvesOnFakeTime(look, 1_000)).toBe(true);
    expect((await look).holdMs).toBe(120);
  });

  it("a release the gate fails once is sent to it again: the gate does not keep the key for its TTL", async () => {
    // A gate that keeps the key of a released lock makes its whole line wait for the key's TTL as
    // for a holder that died, while the other nodes are free. The first release request to the gate
    // fails (a dropped connection); the others release.
    const { nodes, gate } = nodesWithGate(1);
    const flaky = failingOnce(gate, (args) => args[0] === "EVALSHA" && args[1] === gateReleaseScript.sha1);
    const redlock = new Redlock({ nodes: nodes.map((n) => (n === gate ? flaky.node : n)), clock: fakeClock });
    const acquiring = redlock.acquire("k", 10_000);
    expect(await resolvesOnFakeTime(acquiring, 1000)).toBe(true);
    const lock = await acquiring;
    expect(await resolvesOnFakeTime(lock.release(), 1000)).toBe(true);
    expect(await resolvesOnFakeTime(redlock.settled(), 5000)).toBe(true);
    expect(flaky.failures()).toBe(1);
    // Read from the nodes themselves: no node keeps the key, the gate included.
    for (const node of nodes) expect(node.get("k")).toBeUndefined();
  });

  /**
   * Client A waits for the key (so it is hot for A), gets it, and releases it while the gate's
   * answer to that release never comes (nor any reaction to its abort): as on Workers, when the
   * release outlived its request (waitUntil ended at the quorum) and that request's I/O and timers
   * were cancelled. A's release kept a place in line for A's next acquisition, resolved by that
   * answer.
   */
  async function releaseWithLostGateAnswer() {
    const { nodes, gate } = nodesWithGate(1);
    let cutOff = false;
    const lostGate: RedisNode = {
      id: gate.id,
      command: (args, signal) =>
        cutOff && args[0] === "EVALSHA" && args[1] === gateReleaseScript.sha1
          ? new Promise<RedisReply>(() => {})
          : gate.command(args, signal),
    };
    const a = new Redlock({ nodes: nodes.map((n) => (n === gate ? lostGate : n)), clock: fakeClock });
    const b = new Redlock({ nodes, clock: fakeClock });
    // B holds; A waits for it.
    const firstAcquire = b.acquire("k", 2000);
    expect(await resolvesOnFakeTime(firstAcquire, 1000)).toBe(true);
    const first = await firstAcquire;
    const aWaits = a.acquire("k", 2000);
    expect(await resolvesOnFakeTime(new Promise((r) => setTimeout(r, 40)), 100)).toBe(true);
    expect(await resolvesOnFakeTime(first.release(), 1000)).toBe(true);
    expect(await resolvesOnFakeTime(aWaits, 5000)).toBe(true);
    const aLock = await aWaits;
    cutOff = true;
    expect(await resolvesOnFakeTime(aLock.release(), 1000)).toBe(true);
    return { a, nodes };
  }

  it("a kept place whose release never hears from the gate (its request's I/O was cancelled) does not hold up the next acquisition", async () => {
    // Before the fix the next acquisition of the key awaited that place forever (one demo request
    // hung until the client's 300 s timeout).
    const { a, nodes } = await releaseWithLostGateAnswer();
    // The gate still holds A's key (its DEL never ran): the next acquisition waits for its TTL.
    const again = a.acquire("k", 2000);
    expect(await resolvesOnFakeTime(again, 10_000)).toBe(true);
    const lock = await again;
    expect(nodes.filter((n) => n.get("k") === lock.token).length).toBeGreaterThanOrEqual(3);
  });

  it("an acquisition waiting for a kept place ends at once when its signal aborts", async () => {
    const { a } = await releaseWithLostGateAnswer();
    const controller = new AbortController();
    const started = Date.now();
    const outcome = a.acquire("k", 2000, { signal: controller.signal }).then(
      () => "acquired",
      (error: unknown) => error,
    );
    setTimeout(() => controller.abort(new Error("caller gave up")), 10);
    expect(await resolvesOnFakeTime(outcome, 5000)).toBe(true);
    expect(await outcome).toBeInstanceOf(AbortedError);
    // Well before the release's request deadline (200 ms), when the wait for the place ends anyway.
    expect(Date.now() - started).toBeLessThan(100);
  });
});
