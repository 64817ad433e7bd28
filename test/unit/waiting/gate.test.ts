/**
 * The gate's rule for a free lock (src/waiting/scripts/gate.ts, modelled by src/testing/gate.ts):
 * the first in line has it to itself for half a hold (20 ms at least), then whoever polls first
 * takes it, so that a first in line that sleeps stalls no one. The tests below pin when that
 * half hold starts when the gate saw no release of the lock.
 */
import { describe, expect, it } from "vitest";
import { type GateAnswer, pollGate, releaseOnGate } from "../../../src/waiting/gate.js";
import { fakeNodes } from "../support/fake-node.js";
import { run, useFakeTime } from "../support/fake-time.js";

useFakeTime();

const KEY = "k";
const waitMs = (ms: number) => run(new Promise((resolve) => setTimeout(resolve, ms)), 1);

function gateNode() {
  const [node] = fakeNodes(1);
  if (!node) throw new Error("no node");
  const poll = (waiter: string, mode: "take" | "wait" = "take"): Promise<GateAnswer> =>
    run(
      pollGate(
        node,
        [KEY],
        { waiter, mode, token: waiter.padEnd(40, "0"), ttlMs: 5000, leaseMs: 5000, ticket: 0 },
        { signal: new AbortController().signal, countRequest() {} },
      ),
      1,
    );
  const context = { signal: new AbortController().signal, countRequest() {} };
  const release = (waiter: string) =>
    run(releaseOnGate(node, [KEY], waiter.padEnd(40, "0"), { ttlMs: 5000, gateLeadMs: 0 }, context), 1);
  return { node, poll, release };
}

/**
 * A line's first contention (no hold recorded): a holder that won by a plain fan-out (no take at
 * the gate) holds KEY, waiters w1 and w2 line up, and the lock comes free without a release
 * through the gate (released elsewhere, or expired). Then w2 looks: not yet its own, the first in
 * line may be on its way.
 */
async function freedAtFirstContention() {
  const gate = gateNode();
  gate.node.occupy(KEY, "h".repeat(40), 5000);
  expect((await gate.poll("w1")).rank).toBe(0);
  expect((await gate.poll("w2")).rank).toBe(1);
  gate.node.occupy(KEY, "gone", 1);
  await waitMs(5);
  const look = await gate.poll("w2");
  expect(look.taken).toBe(false);
  expect(look.pttlMs).toBe(-2);
  return gate;
}

describe("a free lock the gate saw no release of", () => {
  it("at a line's first contention (no hold recorded): the first in line's for 20 ms from the first poll that found it free, then anyone's", async () => {
    const { poll } = await freedAtFirstContention();
    await waitMs(10);
    expect((await poll("w2")).taken).toBe(false);
    // 20 ms after that first look, the first in line has not come: whoever polls takes it.
    await waitMs(15);
    expect((await poll("w2")).taken).toBe(true);
  });

  it("negative control: the first in line that comes within the 20 ms takes it, and the one behind it finds it held", async () => {
    const { poll } = await freedAtFirstContention();
    await waitMs(10);
    expect((await poll("w1")).taken).toBe(true);
    await waitMs(30);
    const behind = await poll("w2");
    expect(behind.taken).toBe(false);
    expect(behind.pttlMs).toBeGreaterThan(0);
  });

  it("a look that finds the lock held again starts the count anew", async () => {
    const { node, poll } = await freedAtFirstContention();
    // Held again (by a plain fan-out, past the gate), then free again much later.
    node.occupy(KEY, "x".repeat(40), 100);
    await waitMs(20);
    expect((await poll("w2")).pttlMs).toBeGreaterThan(0);
    await waitMs(100);
    // Free again: counted from this look, not from the first.
    expect((await poll("w2")).taken).toBe(false);
    await waitMs(25);
    expect((await poll("w2")).taken).toBe(true);
  });
});

/**
 * A line whose holds the gate has learned (100 ms), holder h holding KEY again: w1, first in line,
 * is told when the lock frees up (in 100 ms), and w2 lines up behind it. Then h lets go early,
 * 40 ms in.
 */
async function releasedBeforeTheTimeTold() {
  const gate = gateNode();
  expect((await gate.poll("h")).taken).toBe(true);
  await waitMs(100);
  expect((await gate.release("h")).outcome).toBe("released");
  expect((await gate.poll("h")).taken).toBe(true);
  const first = await gate.poll("w1");
  expect(first.rank).toBe(0);
  expect(first.freeInMs).toBe(100);
  expect((await gate.poll("w2")).rank).toBe(1);
  await waitMs(40);
  expect((await gate.release("h")).outcome).toBe("released");
  return gate;
}

describe("a release before the time the gate told the first in line", () => {
  it("the lock stays the first in line's until half a hold after that time, not after the release: its take is aimed there", async () => {
    const { poll } = await releasedBeforeTheTimeTold();
    // Half a hold (50 ms) after the release, 5 ms before the time told: the take aimed at it (a
    // fan-out, its other nodes asked at once) is on its way, and a take here would split them.
    await waitMs(55);
    const behind = await poll("w2");
    expect(behind.taken).toBe(false);
    expect(behind.pttlMs).toBe(-2);
    await waitMs(10);
    expect((await poll("w1")).taken).toBe(true);
  });

  it("negative control: a first in line that does not come by half a hold after that time loses it to whoever polls", async () => {
    const { poll } = await releasedBeforeTheTimeTold();
    await waitMs(55);
    expect((await poll("w2")).taken).toBe(false);
    await waitMs(60);
    expect((await poll("w2")).taken).toBe(true);
  });
});
