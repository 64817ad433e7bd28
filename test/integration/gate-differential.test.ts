/**
 * The gate scripts on a real redis-server answer like the memory node of `edge-redlock/testing`
 * (src/testing/gate.ts), on the same sequence of commands: the unit tests of waiting, and users'
 * tests on memory nodes, rest on that model.
 */
import { describe, expect, inject, it } from "vitest";
import type { Script } from "../../src/core/scripts/script.js";
import { type RedisArgument, restNode } from "../../src/index.js";
import { memoryNode } from "../../src/testing/index.js";
import { gateKeys, handOverOnNode, pollGate, releaseOnGate } from "../../src/waiting/gate.js";
import { gateScript } from "../../src/waiting/scripts/gate.js";
import { gateReleaseScript } from "../../src/waiting/scripts/gate-release.js";
import { uniqueKey } from "./support/nodes.js";

const nodes = inject("nodes");

/** What a release tells the gate of the hold it ends: the TTL, and how long the gate was ours before the grant. */
const held = (ttlMs: number, gateLeadMs = 0) => ({ ttlMs, gateLeadMs });

/** A memory node (on the real clock, like the server's), and the commands the tests send it. */
function modelStore() {
  const node = memoryNode({ id: "model" });
  const send = (...args: RedisArgument[]) => node.command(args, AbortSignal.timeout(5000));
  const evalsha = async (script: Script, keys: readonly string[], argv: readonly string[]) =>
    (await send("EVALSHA", script.sha1, keys.length, ...keys, ...argv)) as number[];
  return {
    get: (key: string) => node.get(key),
    send,
    set: (key: string, value: string, ttlMs: number) => send("SET", key, value, "PX", ttlMs),
    del: (key: string) => send("DEL", key),
    gate: (keys: readonly string[], argv: readonly string[]) => evalsha(gateScript, keys, argv),
    gateRelease: (keys: readonly string[], argv: readonly string[]) => evalsha(gateReleaseScript, keys, argv),
  };
}

/**
 * A gate on the first node for one lock key per name (sorted, as a resource set), its model, and
 * the calls the tests below make on both. `key` is the first lock key.
 */
function gateFixture(...names: string[]) {
  const node = restNode(nodes[0] as { url: string; token: string });
  const model = modelStore();
  const lockKeys = names.map(uniqueKey).sort();
  const key = lockKeys[0] as string;
  const keys = [...lockKeys, ...gateKeys(lockKeys)];
  const context = () => ({ signal: AbortSignal.timeout(5000), countRequest() {} });
  const request = (waiter: string, mode: "take" | "aim" | "wait" | "leave", token: string, expectMs = 0) =>
    ({ waiter, mode, token, ttlMs: 5000, leaseMs: 5000, ticket: 0, expectMs }) as const;
  const modelPoll = (waiter: string, mode: string, token: string, expectMs = 0) =>
    model.gate(keys, [waiter, mode, token, "5000", "5000", String(lockKeys.length), "0", String(expectMs)]);
  /** A take on both that must succeed (`expectMs`: the taker's isolate's hold): the real answer and the model's reply. */
  const take = async (waiter: string, token: string, mode: "take" | "aim" = "take", expectMs = 0) => {
    const real = await pollGate(node, lockKeys, request(waiter, mode, token, expectMs), context());
    const modelled = await modelPoll(waiter, mode, token, expectMs);
    expect(real.taken).toBe(true);
    expect(modelled[0]).toBe(1);
    return { real, modelled };
  };
  /** A release on both, reporting the hold's lead. */
  const release = async (token: string, gateLeadMs = 0) => {
    const real = await releaseOnGate(node, lockKeys, token, held(5000, gateLeadMs), context());
    const modelled = await model.gateRelease(keys, [
      token,
      String(lockKeys.length),
      "5000",
      "",
      "0",
      String(gateLeadMs),
    ]);
    return { real, modelled };
  };
  /** A waiter's look at the gate on both (it steps out of line again, so the next take stays first in line). */
  const look = async () => {
    const real = await pollGate(node, lockKeys, request("w9", "wait", "-"), context());
    const modelled = await modelPoll("w9", "wait", "-");
    await pollGate(node, lockKeys, request("w9", "leave", "-"), context());
    await modelPoll("w9", "leave", "-");
    return { real, modelled };
  };
  /** A poll on both, whose take and rank must agree. */
  const both = async (waiter: string, mode: "take" | "wait", token: string) => {
    const real = await pollGate(node, lockKeys, request(waiter, mode, token), context());
    const modelled = await modelPoll(waiter, mode, token);
    expect({ taken: real.taken, rank: real.rank }, `${waiter} ${mode}`).toEqual({
      taken: modelled[0] === 1,
      rank: modelled[1],
    });
    return real;
  };
  return { node, model, key, lockKeys, keys, context, request, modelPoll, take, release, look, both };
}

describe("gate scripts: Lua and model agree", () => {
  it("on takes, waits, leaves and releases by several waiters", async () => {
    const node = restNode(nodes[0] as { url: string; token: string });
    const model = modelStore();
    const key = uniqueKey("gate-diff");
    const keys = [key, ...gateKeys([key])];
    const context = () => ({ signal: AbortSignal.timeout(5000), countRequest() {} });
    const steps: [string, "take" | "wait" | "leave" | "release", string][] = [
      ["w1", "take", "t1".repeat(20)],
      ["w2", "take", "t2".repeat(20)],
      ["w3", "wait", "t3".repeat(20)],
      ["w2", "take", "t2".repeat(20)],
      ["w1", "release", "t1".repeat(20)],
      ["w3", "take", "t3".repeat(20)],
      ["w2", "take", "t2".repeat(20)],
      ["w4", "take", "t4".repeat(20)],
      ["w2", "release", "t2".repeat(20)],
      ["w4", "leave", "-"],
      ["w3", "take", "t3".repeat(20)],
      ["w3", "release", "t3".repeat(20)],
    ];
    for (const [waiter, mode, token] of steps) {
      if (mode === "release") {
        // Holds of 600 ms or more: the first in line then has half a hold (300 ms) to come for the
        // lock before whoever polls first may take it, far from the few ms by which the model's
        // clock and the server's read the same step apart on a loaded machine.
        await new Promise((r) => setTimeout(r, 600));
        const real = await releaseOnGate(node, [key], token, held(5000), context());
        const modelled = await model.gateRelease(keys, [token, "1", "5000", "", "0"]);
        expect(
          { outcome: real.outcome, waiting: real.waiting, ticket: real.ticket, turns: real.turns },
          `${waiter} ${mode}`,
        ).toEqual({
          outcome: modelled[0] ? "released" : "not-held",
          waiting: modelled[1],
          ticket: modelled[2],
          turns: modelled[6],
        });
        continue;
      }
      const request = { waiter, mode, token, ttlMs: 5000, leaseMs: 5000, ticket: 0 } as const;
      const real = await pollGate(node, [key], request, context());
      const [taken, rank, pttl, , , ticket, , , turns] = await model.gate(keys, [
        waiter,
        mode,
        token,
        "5000",
        "5000",
        "1",
        "0",
      ]);
      const label = `${waiter} ${mode}`;
      expect(real.taken, label).toBe(taken === 1);
      expect(real.rank, label).toBe(rank);
      expect(real.ticket, label).toBe(ticket);
      expect(real.turns, label).toBe(turns);
      // PTTLs are read a few milliseconds apart.
      expect(Math.abs(real.pttlMs - (pttl as number)), label).toBeLessThan(1000);
      expect(real.pttlMs === -2, label).toBe(pttl === -2);
    }
  });
});

describe("gate scripts: what the gate learns", () => {
  it("learns holds from takes at the gate only, less the lead its holder reports, on real Redis and in the model", async () => {
    const { node, model, key, keys, context, request, modelPoll } = gateFixture("gate-learn");
    const wait = (waiter: string) => request(waiter, "wait", "-");

    // A plain SET NX holder (as a first fan-out sets the gate node): its release teaches nothing.
    const plain = "p".repeat(40);
    await node.command(["SET", key, plain, "NX", "PX", 5000], AbortSignal.timeout(5000));
    await model.set(key, plain, 5000);
    await new Promise((r) => setTimeout(r, 30));
    await releaseOnGate(node, [key], plain, held(5000), context());
    await model.gateRelease(keys, [plain, "1", "5000", "", "0"]);
    expect((await pollGate(node, [key], wait("w0"), context())).holdMs).toBe(0);
    expect((await modelPoll("w0", "wait", "-"))[4]).toBe(0);
    await pollGate(node, [key], { ...wait("w0"), mode: "leave" }, context());
    await modelPoll("w0", "leave", "-");

    // A take at the gate, held 300 ms, whose holder had the lock 200 ms after the take (a poll
    // took the gate, then the other nodes took a round trip): the gate learns the 100 ms it would
    // have held with the others asked in the take's own round trip.
    const taken = "t".repeat(40);
    const started = performance.now();
    const take = await pollGate(node, [key], { ...wait("w1"), mode: "take", token: taken }, context());
    expect(take.taken).toBe(true);
    expect((await modelPoll("w1", "take", taken))[0]).toBe(1);
    await new Promise((r) => setTimeout(r, 300));
    await releaseOnGate(node, [key], taken, held(5000, 200), context());
    const heldAtMost = performance.now() - started;
    await model.gateRelease(keys, [taken, "1", "5000", "", "0", "200"]);
    const learned = (await pollGate(node, [key], wait("w2"), context())).holdMs;
    const modelLearned = (await modelPoll("w2", "wait", "-"))[4] as number;
    for (const hold of [learned, modelLearned]) {
      expect(hold).toBeGreaterThanOrEqual(99);
      expect(hold).toBeLessThanOrEqual(Math.ceil(heldAtMost) - 200 + 1);
    }

    // The next take held as long, with no lead (a take aimed at the release): the average moves up
    // by a quarter of the difference, and the deviation by a quarter of it.
    const aimed = "a".repeat(40);
    expect((await pollGate(node, [key], { ...wait("w2"), mode: "take", token: aimed }, context())).taken).toBe(true);
    expect((await modelPoll("w2", "take", aimed))[0]).toBe(1);
    await new Promise((r) => setTimeout(r, 300));
    await releaseOnGate(node, [key], aimed, held(5000), context());
    await model.gateRelease(keys, [aimed, "1", "5000", "", "0"]);
    const after = await pollGate(node, [key], wait("w3"), context());
    const modelAfter = await modelPoll("w3", "wait", "-");
    for (const [hold, deviation, before] of [
      [after.holdMs, after.holdDeviationMs, learned],
      [modelAfter[4] as number, modelAfter[6] as number, modelLearned],
    ] as const) {
      expect(hold).toBeGreaterThanOrEqual(Math.floor((3 * before + 299) / 4));
      expect(hold).toBeLessThan(before + 100);
      expect(deviation).toBeGreaterThanOrEqual(Math.floor((299 - before) / 4));
    }
  });

  it("predicts the release of a holder that took by a poll a lead later than one whose take was aimed, on real Redis and in the model", async () => {
    const { take, release, look } = gateFixture("gate-lead");
    // A hold taken by a poll, held about 300 ms, whose holder had the lock 200 ms after the take:
    // the gate learns a hold of about 100 ms and a lead of 200 ms.
    await take("w1", "f".repeat(40));
    await new Promise((r) => setTimeout(r, 300));
    await release("f".repeat(40), 200);

    // A take aimed at the release: the holder is predicted to let go a hold after its take.
    await take("w2", "a".repeat(40), "aim");
    const behindAim = await look();
    expect(behindAim.real.freeInMs).toBeLessThanOrEqual(behindAim.real.holdMs);
    expect(behindAim.modelled[3]).toBeLessThanOrEqual(behindAim.modelled[4] as number);
    await release("a".repeat(40));

    // A take by a poll: a lead later.
    await take("w3", "p".repeat(40));
    const behindPoll = await look();
    expect(behindPoll.real.freeInMs).toBeGreaterThan(behindPoll.real.holdMs + 100);
    expect(behindPoll.modelled[3]).toBeGreaterThan((behindPoll.modelled[4] as number) + 100);
  });

  it("predicts a holder's release by the hold its isolate told at its take, and a release says the hold it taught, on real Redis and in the model", async () => {
    const { node, model, keys, lockKeys, context, request, modelPoll, take, release, look } =
      gateFixture("gate-expect");
    // A hold of about 150 ms, taken at the gate: the release says how long the gate measured it.
    await take("w1", "f".repeat(40));
    await new Promise((r) => setTimeout(r, 150));
    const first = await release("f".repeat(40));
    expect(first.real.heldMs).toBeGreaterThanOrEqual(140);
    expect(first.real.heldMs).toBeLessThan(2000);
    expect(first.modelled[9]).toBeGreaterThanOrEqual(140);
    expect(first.modelled[9]).toBeLessThan(2000);

    // A taker whose isolate holds for 3 s: predicted by its own figure, not the line's 150 ms.
    await take("w2", "a".repeat(40), "aim", 3000);
    const told = await look();
    expect(told.real.holdMs).toBeLessThan(2000);
    expect(told.real.freeInMs).toBeGreaterThan(2500);
    expect(told.modelled[3]).toBeGreaterThan(2500);
    // A release that is not the taker's teaches nothing, and says so.
    const stranger = await release("x".repeat(40));
    expect(stranger.real.heldMs).toBe(0);
    expect(stranger.modelled[9]).toBe(0);
    const mine = await release("a".repeat(40));
    expect(mine.real.heldMs).toBeGreaterThan(0);
    expect(mine.modelled[9]).toBeGreaterThan(0);
    // The same release again deletes nothing and teaches nothing.
    const again = await release("a".repeat(40));
    expect(again.real.heldMs).toBe(0);
    expect(again.modelled[9]).toBe(0);

    // Negative control: a taker that told nothing is predicted by the line's average.
    await take("w3", "b".repeat(40), "aim");
    const average = await look();
    expect(average.real.freeInMs).toBeLessThanOrEqual(average.real.holdMs);
    expect(average.modelled[3]).toBeLessThanOrEqual(average.modelled[4] as number);

    // A hand-over tells the gate the next holder's isolate's hold as its take would.
    await pollGate(node, lockKeys, request("w4", "wait", "-"), context());
    await modelPoll("w4", "wait", "-");
    const next = { token: "n".repeat(40), ttlMs: 5000, waiter: "w4", expectMs: 3000 };
    const handed = await releaseOnGate(node, lockKeys, "b".repeat(40), held(5000), context(), undefined, next);
    const modelHanded = await model.gateRelease(keys, [
      "b".repeat(40),
      String(lockKeys.length),
      "5000",
      "",
      "0",
      "0",
      next.token,
      "5000",
      "w4",
      "3000",
    ]);
    expect(handed.handedOver).toBe(true);
    expect(modelHanded[7]).toBe(1);
    const afterHandOver = await look();
    expect(afterHandOver.real.freeInMs).toBeGreaterThan(2500);
    expect(afterHandOver.modelled[3]).toBeGreaterThan(2500);
  });

  it("counts a hold from its take at the gate, though the holder extended it, on real Redis and in the model", async () => {
    const { node, model, key, keys, context, request, modelPoll } = gateFixture("gate-extend");
    const wait = (waiter: string) => request(waiter, "wait", "-");
    // A hold of about 100 ms, learned.
    const first = "f".repeat(40);
    expect((await pollGate(node, [key], { ...wait("w1"), mode: "take", token: first }, context())).taken).toBe(true);
    expect((await modelPoll("w1", "take", first))[0]).toBe(1);
    await new Promise((r) => setTimeout(r, 100));
    await releaseOnGate(node, [key], first, held(5000), context());
    await model.gateRelease(keys, [first, "1", "5000", "", "0"]);
    const learned = (await pollGate(node, [key], wait("w2"), context())).holdMs;
    const modelLearned = (await modelPoll("w2", "wait", "-"))[4] as number;
    expect(learned).toBeGreaterThanOrEqual(99);
    expect(modelLearned).toBeGreaterThanOrEqual(99);

    // The next holder takes at the gate and extends its key after three such holds: the lock is
    // past the prediction, though the extension reset the key's PTTL to the TTL.
    const second = "s".repeat(40);
    expect((await pollGate(node, [key], { ...wait("w2"), mode: "take", token: second }, context())).taken).toBe(true);
    expect((await modelPoll("w2", "take", second))[0]).toBe(1);
    await new Promise((r) => setTimeout(r, 300));
    await node.command(["PEXPIRE", key, 5000], AbortSignal.timeout(5000));
    await model.send("PEXPIRE", key, 5000);
    const behind = await pollGate(node, [key], wait("w3"), context());
    expect(behind.pttlMs).toBeGreaterThan(4900);
    expect(behind.freeInMs).toBe(0);
    expect((await modelPoll("w3", "wait", "-"))[3]).toBe(0);

    // Its release teaches a hold of 300 ms or more (the time since the extension would be a few ms).
    await releaseOnGate(node, [key], second, held(5000), context());
    await model.gateRelease(keys, [second, "1", "5000", "", "0"]);
    expect((await pollGate(node, [key], wait("w3"), context())).holdMs).toBeGreaterThan(learned);
    expect((await modelPoll("w3", "wait", "-"))[4]).toBeGreaterThan(modelLearned);
  });

  it("counts takes that found the keys free with no release since the take before, and predicts no end to such a hold, on real Redis and in the model", async () => {
    const fixture = gateFixture("gate-unreleased");
    const { node, model, key, release, look } = fixture;
    /** A take on both: how many takes in a row found the keys free with no release, real and modelled. */
    const take = async (waiter: string, token: string) => {
      const { real, modelled } = await fixture.take(waiter, token);
      return [real.unreleasedTakes, modelled[10]];
    };
    // The key runs out (a placeholder, or the lock of a holder that died): no release.
    const vanish = async () => {
      await node.command(["DEL", key], AbortSignal.timeout(5000));
      await model.del(key);
    };
    // A hold of about 100 ms is learned; the next take follows a release: predictable.
    expect(await take("w0", "a".repeat(40))).toEqual([0, 0]);
    await new Promise((r) => setTimeout(r, 100));
    await release("a".repeat(40));
    expect(await take("w1", "b".repeat(40))).toEqual([0, 0]);
    const before = await look();
    expect(before.real.freeInMs).toBeGreaterThan(0);
    expect(before.modelled[3]).toBeGreaterThan(0);
    // Takes after keys that ran out count up, and their holds are not predicted.
    await vanish();
    expect(await take("w2", "c".repeat(40))).toEqual([1, 1]);
    const behind = await look();
    expect([behind.real.holdMs > 0, behind.real.pttlMs > 0, behind.real.freeInMs]).toEqual([true, true, 0]);
    expect(behind.modelled[3]).toBe(0);
    await vanish();
    expect(await take("w3", "d".repeat(40))).toEqual([2, 2]);
    // A release through the gate ends the count.
    await release("d".repeat(40));
    expect(await take("w4", "e".repeat(40))).toEqual([0, 0]);
  });
});

describe("gate scripts: keys shared with another resource set", () => {
  it("a poll that finds the lock keys partly held says contested, for 2 s, on real Redis and in the model", async () => {
    const { node, model, lockKeys, context, request, modelPoll } = gateFixture("contested-a", "contested-b");
    const [a, b] = lockKeys as [string, string];
    const token = "t".repeat(40);
    const poll = async (waiter: string) => {
      const real = await pollGate(node, lockKeys, request(waiter, "take", token), context());
      const modelled = await modelPoll(waiter, "take", token);
      return {
        real: { taken: real.taken, contested: real.contested },
        modelled: { taken: modelled[0] === 1, contested: modelled[9] === 1 },
      };
    };

    // All free, then all held by one holder of the same set: not contested.
    const same = "s".repeat(40);
    for (const key of [a, b]) {
      await node.command(["SET", key, same, "PX", 5000], AbortSignal.timeout(5000));
      await model.set(key, same, 5000);
    }
    const whole = await poll("w1");
    expect(whole.real).toEqual({ taken: false, contested: false });
    expect(whole.modelled).toEqual(whole.real);

    // Only b held, by another set's holder: contested.
    await node.command(["DEL", a], AbortSignal.timeout(5000));
    await model.del(a);
    const part = await poll("w1");
    expect(part.real).toEqual({ taken: false, contested: true });
    expect(part.modelled).toEqual(part.real);

    // Free again, within 2 s: a waiter further back still hears of it (the first in line takes).
    await node.command(["DEL", b], AbortSignal.timeout(5000));
    await model.del(b);
    const after = await poll("w2");
    expect(after.real).toEqual({ taken: false, contested: true });
    expect(after.modelled).toEqual(after.real);
  });
});

describe("gate scripts: a place kept by a release", () => {
  it("a release with others in line puts the releaser at the back, on real Redis and in the model", async () => {
    const { node, model, key, keys, context, request, modelPoll } = gateFixture("gate-requeue");
    const holder = "h".repeat(40);

    // Alone: a release keeps no place (nobody to queue behind).
    expect((await pollGate(node, [key], request("w1", "take", holder), context())).taken).toBe(true);
    await modelPoll("w1", "take", holder);
    const alone = await releaseOnGate(node, [key], holder, held(5000), context(), { waiter: "w1-next", leaseMs: 2000 });
    const aloneModel = await model.gateRelease(keys, [holder, "1", "5000", "w1-next", "2000"]);
    expect(alone.ticket).toBe(0);
    expect(aloneModel[2]).toBe(0);

    // With w2 in line: the releaser's next entry goes behind w2.
    const again = "g".repeat(40);
    expect((await pollGate(node, [key], request("w1", "take", again), context())).taken).toBe(true);
    await modelPoll("w1", "take", again);
    expect((await pollGate(node, [key], request("w2", "wait", "-"), context())).rank).toBe(0);
    await modelPoll("w2", "wait", "-");
    const kept = await releaseOnGate(node, [key], again, held(5000), context(), { waiter: "w1-next", leaseMs: 2000 });
    const keptModel = await model.gateRelease(keys, [again, "1", "5000", "w1-next", "2000"]);
    expect(kept.outcome).toBe("released");
    expect(kept.waiting).toBe(1);
    expect(kept.ticket).toBeGreaterThan(0);
    expect(kept.ticket).toBe(keptModel[2]);
    const later = await pollGate(node, [key], { ...request("w1-next", "wait", "-"), ticket: kept.ticket }, context());
    expect(later.rank).toBe(1);
    expect(later.ticket).toBe(kept.ticket);
    expect((await modelPoll("w1-next", "wait", "-"))[1]).toBe(1);
  });
});

describe("gate scripts: a lock left free without a release through the gate", () => {
  it("goes to whoever polls once a hold and a half have passed since the last take, not to a place nobody comes back for, on real Redis and in the model", async () => {
    const { node, model, key, keys, context, both } = gateFixture("gate-left-free");

    // The gate learns a hold of about 40 ms.
    const first = "f".repeat(40);
    expect((await both("w1", "take", first)).taken).toBe(true);
    await new Promise((r) => setTimeout(r, 40));
    await releaseOnGate(node, [key], first, held(5000), context());
    await model.gateRelease(keys, [first, "1", "5000", "", "0"]);

    // Taken at the gate, then a place joins the line and is never polled again; the holder's key
    // goes without a release through the gate (a placeholder running out, a lock expiring).
    const second = "s".repeat(40);
    expect((await both("w2", "take", second)).taken).toBe(true);
    expect((await both("ghost", "wait", "-")).rank).toBe(0);
    await node.command(["DEL", key], AbortSignal.timeout(5000));
    await model.del(key);

    // Right away the place at the head keeps its turn; a hold and a half later, it does not.
    const third = "n".repeat(40);
    expect((await both("w3", "take", third)).taken).toBe(false);
    await new Promise((r) => setTimeout(r, 150));
    expect((await both("w3", "take", third)).taken).toBe(true);
  });

  it("with no hold recorded, goes to whoever polls 20 ms after a poll first found it free, and a look that finds it held starts that anew, on real Redis and in the model", async () => {
    const { node, model, key, both } = gateFixture("gate-first-contention");
    const set = async (token: string, ttlMs: number) => {
      await node.command(["SET", key, token, "PX", ttlMs], AbortSignal.timeout(5000));
      await model.set(key, token, ttlMs);
    };
    const del = async () => {
      await node.command(["DEL", key], AbortSignal.timeout(5000));
      await model.del(key);
    };
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // A line's first contention: the holder won by a plain fan-out (no take at the gate), two
    // places join, and the lock goes without a release through the gate.
    await set("h".repeat(40), 5000);
    expect((await both("head", "take", "a".repeat(40))).rank).toBe(0);
    expect((await both("w2", "take", "b".repeat(40))).rank).toBe(1);
    await del();
    // The first look that finds it free keeps it for the head; so does one right after, which
    // finds it held again (a plain fan-out past the gate) and starts the count anew.
    expect((await both("w2", "take", "b".repeat(40))).taken).toBe(false);
    await pause(100);
    await set("x".repeat(40), 5000);
    expect((await both("w2", "take", "b".repeat(40))).taken).toBe(false);
    await del();
    expect((await both("w2", "take", "b".repeat(40))).taken).toBe(false);
    // Well past 20 ms since that look, the head has not come: the poll behind it takes the lock.
    await pause(150);
    expect((await both("w2", "take", "b".repeat(40))).taken).toBe(true);
  });
});

describe("handing a lock over in its release", () => {
  const context = () => ({ signal: AbortSignal.timeout(5000), countRequest() {} });

  it("the gate hands the keys over to its first in line only, with every key free, on real Redis and in the model", async () => {
    const { node, model, key, keys, take, both } = gateFixture("gate-hand-over");
    /** A release of `token` on both that hands over to `waiter` with `next`. */
    const releaseTo = async (token: string, next: string, waiter: string) => {
      const real = await releaseOnGate(node, [key], token, held(5000), context(), undefined, {
        token: next,
        ttlMs: 4000,
        waiter,
      });
      const modelled = await model.gateRelease(keys, [token, "1", "5000", "", "0", "0", next, "4000", waiter]);
      expect({
        outcome: real.outcome,
        waiting: real.waiting,
        turns: real.turns,
        handedOver: real.handedOver,
        headTicket: real.headTicket,
      }).toEqual({
        outcome: modelled[0] ? "released" : "not-held",
        waiting: modelled[1],
        turns: modelled[6],
        handedOver: modelled[7] === 1,
        headTicket: modelled[8],
      });
      const value = await node.command(["GET", key], AbortSignal.timeout(5000));
      expect(value).toBe(model.get(key) ?? null);
      return { real, value };
    };
    const [t1, t2, t3, t4] = ["1", "2", "3", "4"].map((c) => c.repeat(40)) as [string, string, string, string];

    // w2 and w3 wait behind t1; a release handing over to w3, second in line, hands nothing over.
    await take("w1", t1);
    expect((await both("w2", "wait", "-")).rank).toBe(0);
    expect((await both("w3", "wait", "-")).rank).toBe(1);
    const toSecond = await releaseTo(t1, t3, "w3");
    expect(toSecond.real.handedOver).toBe(false);
    expect(toSecond.value).toBeNull();
    // The release names the first in line, w2, by its ticket (the lock is free for it).
    const w2Ticket = (await both("w2", "wait", "-")).ticket;
    expect(toSecond.real.headTicket).toBe(w2Ticket);

    // w2 takes; its release hands over to w3, now first in line: w3 holds the key, left the line,
    // and the gate counts its hold from the hand-over.
    expect((await both("w2", "take", t2)).taken).toBe(true);
    const toFirst = await releaseTo(t2, t3, "w3");
    expect(toFirst.real.handedOver).toBe(true);
    // w3 left the line with the lock: nobody waits behind it.
    expect(toFirst.real.headTicket).toBe(0);
    expect(toFirst.value).toBe(t3);
    const pttl = Number(await node.command(["PTTL", key], AbortSignal.timeout(5000)));
    expect(pttl).toBeGreaterThan(3000);
    expect(pttl).toBeLessThanOrEqual(4000);
    expect((await both("w4", "wait", "-")).rank).toBe(0);

    // A release of a token the key no longer holds deletes nothing and hands nothing over.
    const stale = await releaseTo(t1, t4, "w4");
    expect(stale.real).toMatchObject({ outcome: "not-held", handedOver: false });
    expect(stale.value).toBe(t3);
  });

  it("the hand-over script deletes the releasing token's keys and sets the next holder's only where every key is free", async () => {
    const node = restNode(nodes[0] as { url: string; token: string });
    const [a, b] = [uniqueKey("hand-over-a"), uniqueKey("hand-over-b")].sort() as [string, string];
    const get = (key: string) => node.command(["GET", key], AbortSignal.timeout(5000));
    const next = { token: "n".repeat(40), ttlMs: 3000 };
    const mine = "m".repeat(40);
    const theirs = "t".repeat(40);
    const set = (key: string, value: string) =>
      node.command(["SET", key, value, "PX", 10_000], AbortSignal.timeout(5000));

    // Free: nothing deleted, taken for the next holder with its TTL.
    expect(await handOverOnNode(node, [a], mine, next, context())).toEqual({ released: false, taken: true });
    expect(await get(a)).toBe(next.token);
    const pttl = Number(await node.command(["PTTL", a], AbortSignal.timeout(5000)));
    expect(pttl).toBeGreaterThan(2000);
    expect(pttl).toBeLessThanOrEqual(3000);
    // Ours: deleted and taken.
    await set(a, mine);
    expect(await handOverOnNode(node, [a], mine, next, context())).toEqual({ released: true, taken: true });
    expect(await get(a)).toBe(next.token);
    // Someone else's: left alone, nothing taken.
    await set(a, theirs);
    expect(await handOverOnNode(node, [a], mine, next, context())).toEqual({ released: false, taken: false });
    expect(await get(a)).toBe(theirs);
    // Two keys, ours and someone else's: ours deleted, nothing taken (all or none).
    await set(a, mine);
    await set(b, theirs);
    expect(await handOverOnNode(node, [a, b], mine, next, context())).toEqual({ released: true, taken: false });
    expect([await get(a), await get(b)]).toEqual([null, theirs]);
  });
});
