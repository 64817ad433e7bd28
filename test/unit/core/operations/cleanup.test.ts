/**
 * The sweep of a failed attempt (`sweep` in src/core/operations/cleanup.ts) while the call that
 * made it still waits: a `SET` of that attempt held back on its way to a node, given up on at the
 * attempt's deadline, can land after the attempt's cleanup. Left until the call returns, that key
 * holds the lock for a whole TTL, and the call waits in line behind its own key. On fake time.
 */
import { describe, expect, it, vi } from "vitest";
import { type RedisArgument, type RedisNode, Redlock } from "../../../../src/index.js";
import { gateIndex } from "../../../../src/waiting/gate.js";
import { type FakeNode, fakeClock, fakeNodes, isolateView } from "../../support/fake-node.js";
import { resolvesOnFakeTime, run, useFakeTime } from "../../support/fake-time.js";

useFakeTime();

const NODES = 5;
const KEY = "k";
const TTL_MS = 10_000;

/**
 * An isolate 1 ms from every node, whose first `SET` to node `late` reaches it when `lands`
 * resolves, and is applied then whether or not the sender gave up on it (a request held back in
 * the network, or in a proxy in front of the node, past the sender's deadline).
 */
function withALateSet(nodes: readonly FakeNode[], late: number, lands: Promise<unknown>): RedisNode[] {
  const view = isolateView(nodes, () => 1);
  let heldBack = false;
  return view.map((node, i) => ({
    id: node.id,
    command(args: readonly RedisArgument[], signal: AbortSignal) {
      if (i !== late) return node.command(args, signal);
      if (args[0] !== "SET" || heldBack) return node.command(args, signal);
      heldBack = true;
      const landed = lands.then(() => (nodes[late] as FakeNode).execute(args));
      return new Promise((resolve, reject) => {
        landed.then(resolve, reject);
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      });
    },
  }));
}

/**
 * A holder in another isolate keeps KEY; a fresh client calls `acquire()`, and its first attempt's
 * `SET` to the gate node is held back past the attempt's deadline (1 s). The holder releases
 * `releaseAtMs` in, and the held-back `SET` lands on the gate right after that release, before
 * any poll could take the lock there. Returns how long after the release the call had the lock
 * (NaN if it did not).
 */
async function behindItsOwnLateSet(releaseAtMs: number) {
  const nodes = fakeNodes(NODES);
  const gate = gateIndex([KEY], NODES);
  const holder = new Redlock({ nodes: isolateView(nodes, () => 1), clock: fakeClock });
  const held = await run(holder.acquire(KEY, TTL_MS), 1);
  let released: () => void = () => {};
  const releaseLanded = new Promise<void>((resolve) => (released = resolve));
  const waiter = new Redlock({ nodes: withALateSet(nodes, gate, releaseLanded), clock: fakeClock });
  let grantedAt = Number.NaN;
  const call = waiter.acquire(KEY, TTL_MS).then(
    async (lock) => {
      grantedAt = Date.now();
      await lock.release();
    },
    () => undefined,
  );
  await vi.advanceTimersByTimeAsync(releaseAtMs);
  const releasedAt = Date.now();
  await run(held.release(), 10);
  released();
  expect(await resolvesOnFakeTime(Promise.all([call, waiter.settled()]), 60_000)).toBe(true);
  return { afterRelease: grantedAt - releasedAt };
}

describe("a SET of a failed attempt that lands after its cleanup", () => {
  it("is swept while the call still waits: the call gets the lock within a few seconds, not a TTL", async () => {
    // Before, no sweep ran while the call waited: its own key held the gate for the TTL, and the
    // call (and the line behind it) waited about 10 s for it to expire.
    for (const releaseAtMs of [1200, 1500, 1900]) {
      const { afterRelease } = await behindItsOwnLateSet(releaseAtMs);
      expect({ releaseAtMs, afterRelease: afterRelease < 4000 }).toEqual({ releaseAtMs, afterRelease: true });
    }
  });

  it("negative control: a key that lands after the one sweep made while the call waits holds the lock until its TTL", async () => {
    // The sweep while the call waits comes once, a request deadline after the cleanup's release;
    // a SET held back longer than that is found only when the call has returned, or expires.
    const { afterRelease } = await behindItsOwnLateSet(4000);
    expect(Number.isNaN(afterRelease) || afterRelease > 5000).toBe(true);
  });
});
