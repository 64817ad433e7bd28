/** Many callers of one isolate wanting one key at once, on fake time: they queue up, and join the line a few at a time. */
import { describe, expect, it, vi } from "vitest";
import { Redlock } from "../../../src/index.js";
import { gateIndex } from "../../../src/waiting/gate.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";
import { type FakeNode, fakeClock, fakeNodes } from "../support/fake-node.js";
import { advanceUntil, inSteps, resolvesOnFakeTime, useFakeTime } from "../support/fake-time.js";
import { handedOn } from "../support/waiting-scenarios.js";

useFakeTime();

describe("many callers in one isolate", () => {
  it("acquisitions of a key this client is already acquiring or holding go straight to the line, without a fan-out each", async () => {
    // One client shared by the requests of a Worker isolate or a Node process: eight of them
    // want the same key at once. Each used to start with a fan-out of its own (N requests, and
    // they split the votes among themselves); only the first needs to.
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 5, jitterMs: 0 };
    const redlock = new Redlock({ nodes, clock: fakeClock });
    const gate = gateIndex(["shared"], 5);
    const other = nodes[(gate + 1) % 5]!;
    const before = other.log.length;
    let holders = 0;
    let overlaps = 0;
    let done = 0;
    for (let i = 0; i < 8; i++) {
      void redlock.acquire("shared", 2000).then(async (lock) => {
        if (++holders > 1) overlaps++;
        await new Promise((r) => setTimeout(r, 20));
        holders--;
        await lock.release();
        done++;
      });
    }
    await advanceUntil(() => done === 8, inSteps(5, 30_000));
    expect(done).toBe(8);
    expect(overlaps).toBe(0);
    // A node other than the gate sees each grant's SET and release, and little else: 8 first
    // fan-outs would have added 8 SETs.
    const sets = other.log.slice(before).filter((command) => String(command).startsWith("SET")).length;
    expect(sets).toBeLessThan(12);
  });

  it("callers that want a key at once join its line a few at a time, not all in one instant", async () => {
    // 64 requests of one isolate arrive together: the first fans out, the others queue up at
    // once. They all polled the gate in the same instant (63 polls on top of the first fan-out's
    // SET NX); in a trace of the bench (+20 ms per node) the gate's answers came back 100–145 ms
    // later, and the first holder's work and release waited behind them.
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 20 };
    const gate = nodes[gateIndex(["burst"], 5)]!;
    const polls: number[] = [];
    const command = gate.command.bind(gate);
    gate.command = (args, signal) => {
      if (args[0] === "EVALSHA" && args[1] === gateScript.sha1) polls.push(Date.now());
      return command(args, signal);
    };
    const start = Date.now();
    const order: number[] = [];
    let holders = 0;
    let overlaps = 0;
    const acquisitions = Array.from({ length: 64 }, async (_, caller) => {
      const lock = await new Redlock({ nodes, clock: fakeClock }).acquire("burst", 5000);
      if (++holders > 1) overlaps++;
      order.push(caller);
      await new Promise((r) => setTimeout(r, 20));
      holders--;
      await lock.release();
    });
    expect(await resolvesOnFakeTime(Promise.all(acquisitions), 60_000)).toBe(true);
    expect(overlaps).toBe(0);
    expect(new Set(order).size).toBe(64);
    // Before any answer could come back (one round trip), two polls: 63 without the turns.
    expect(polls.filter((at) => at < start + 20).length).toBe(2);
  });

  it("callers joining a line together do not wait for each other on a gate that does not answer: about one request deadline each", async () => {
    // The gate hangs. A caller that waits its turn to join must not wait for each poll ahead of it
    // to time out in turn, nor for one of its own after that: once a join's poll fails, the others
    // fall back to fan-outs at once, and the lock goes round.
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 5 };
    const gateAt = gateIndex(["hung"], 5);
    const redlock = new Redlock({ nodes, clock: fakeClock, requestTimeoutMs: 200 });
    const acquired = redlock.acquire("hung", 10_000);
    expect(await resolvesOnFakeTime(acquired, 1_000)).toBe(true);
    const holder = await acquired;
    (nodes[gateAt] as FakeNode).behaviour = { kind: "hang" };
    const start = Date.now();
    // Each waiter's first fan-out, by waiter (the first 16 reports of all waiters together
    // included second attempts, and hid two waiters whose first came a deadline later).
    const firstTries: number[] = [];
    const waiters = Array.from({ length: 16 }, async (_, k) => {
      const client = new Redlock({ nodes, clock: fakeClock, requestTimeoutMs: 200 });
      const lock = await client.acquire("hung", 10_000, {
        onAttempt: (report) => {
          if (report.operation === "acquire") firstTries[k] ??= Date.now() - start;
        },
      });
      await lock.release();
    });
    await vi.advanceTimersByTimeAsync(100);
    expect(await resolvesOnFakeTime(holder.release(), 1_000)).toBe(true);
    expect(await resolvesOnFakeTime(Promise.all(waiters), 60_000)).toBe(true);
    // Every waiter made its first fan-out within about one request deadline, as one alone does:
    // waiting for a slot and then for a poll of its own took two (405 ms), and joins that waited
    // for each slot's poll to time out in turn spread them up to 634 ms. (Two waiters still took
    // 405 ms while a join's slot ran out at its poll's deadline itself: see `JOIN_GRACE_MS`.)
    expect(firstTries.filter((t) => t !== undefined)).toHaveLength(16);
    expect(Math.max(...firstTries)).toBeLessThan(1.5 * 200);
  });

  it("a client made per request queues up behind a sibling client's fan-out, and its first poll leaves the gate to that fan-out", async () => {
    // Two clients of the same nodes in one isolate (a Worker that makes its client per request),
    // one key, at once. The gate runs the first client's SET 10 ms late, so that whatever the
    // second sends the gate overtakes it. The second used to fan out too, and won the gate while
    // the first won the others: the first held the lock without its gate, the second left a
    // placeholder there, and the line waited for it. A poll that takes the gate did the same.
    const nodes = fakeNodes(5);
    const gateAt = gateIndex(["k"], 5);
    const gate = nodes[gateAt] as FakeNode;
    let firstSet = true;
    gate.latency = (args) => {
      const late = firstSet && args[0] === "SET";
      if (late) firstSet = false;
      return { requestMs: late ? 10 : 0, replyMs: 1 };
    };
    const [first, second] = [0, 1].map(() => new Redlock({ nodes, clock: fakeClock }));
    const order: string[] = [];
    const gateHeld: boolean[] = [];
    const take = async (name: string, client: Redlock) => {
      const lock = await client.acquire("k", 2000);
      order.push(name);
      await new Promise((r) => setTimeout(r, 20));
      gateHeld.push(gate.get(lock.keys[0] as string) === lock.token);
      order.push(`${name} done`);
      await lock.release();
    };
    const both = Promise.all([take("first", first as Redlock), take("second", second as Redlock)]);
    expect(await resolvesOnFakeTime(both, 5000)).toBe(true);
    expect(order).toEqual(["first", "first done", "second", "second done"]);
    // Each holder held the gate too: the votes were never split between the two.
    expect(gateHeld).toEqual([true, true]);
    // A node other than the gate saw one SET, the first's; the second did not fan out, and its
    // lock came in the hand-over of the first's release.
    const other = nodes[(gateAt + 1) % 5] as FakeNode;
    expect({
      sets: other.log.filter((command) => command[0] === "SET").length,
      handOvers: handedOn(other.log),
    }).toEqual({ sets: 1, handOvers: 1 });
  });
});
