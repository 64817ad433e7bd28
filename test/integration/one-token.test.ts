/**
 * One token per holder (issue 27), against real nodes: when a lock goes from its holder to the
 * next caller of the same isolate, nothing the previous holder sends afterwards (a second
 * release, a late extension, an extension or release by token from another client) touches the
 * next holder's keys, and the next holder never claims more than its keys hold on a quorum.
 *
 * Every lock is checked on the nodes themselves (GET + PTTL on every node, see `auditClaim`) and
 * by a client of another isolate, which must not get it while it claims validity. The next holder
 * is always a caller of the same client, waiting before the release: its acquisition offers to
 * take the lock over from that release.
 */
import { describe, expect, it } from "vitest";
import { ExtendError, type Lock, Redlock } from "../../src/index.js";
import { auditClaim } from "./support/claims.js";
import { carries, expectHeldAlone, foreignClient, holdingFetch, sleep } from "./support/isolates.js";
import { raw, uniqueKey } from "./support/nodes.js";
import { useOwnCluster } from "./support/own-cluster.js";

const nodesOf = useOwnCluster();
const endpoints = () => nodesOf().nodes.map(({ url, token }) => ({ url, token }));

/** Long enough for the waiter to poll the gate once and stand first in line, offering a hand-over. */
const WAITER_SETTLES_MS = 600;

/**
 * A holder and a caller of the same client waiting for it (first in line, offering to take the
 * lock over), both with `ttlMs`.
 */
async function holderAndWaiter(
  redlock: Redlock,
  label: string,
  ttlMs = 10_000,
  waiterOptions = {},
): Promise<{ key: string; holder: Lock; waiting: Promise<Lock> }> {
  const key = uniqueKey(label);
  const holder = await redlock.acquire(key, ttlMs);
  const waiting = redlock.acquire(key, ttlMs, waiterOptions);
  waiting.catch(() => undefined);
  await sleep(WAITER_SETTLES_MS);
  return { key, holder, waiting };
}

describe("the check", () => {
  it("catches a lock whose keys are gone, and one whose keys expire before its claim", async () => {
    const redlock = new Redlock({ nodes: endpoints() });
    const gone = await redlock.acquire(uniqueKey("check-gone"), 10_000);
    await Promise.all(endpoints().map((e) => raw(e, "DEL", gone.keys[0] as string)));
    await expect(expectHeldAlone(endpoints(), gone)).rejects.toThrow(/PTTLs/);
    const cut = await redlock.acquire(uniqueKey("check-cut"), 10_000);
    await Promise.all(endpoints().map((e) => raw(e, "PEXPIRE", cut.keys[0] as string, 2000)));
    await expect(expectHeldAlone(endpoints(), cut)).rejects.toThrow(/PTTLs/);
    await cut.release();
  });
});

describe("E: lock.release() sends once", () => {
  it("a second release() after the lock went to the next caller leaves that caller's keys alone", async () => {
    const redlock = new Redlock({ nodes: endpoints() });
    const { holder, waiting } = await holderAndWaiter(redlock, "release-twice");
    const first = await holder.release();
    const next = await waiting;
    const second = await holder.release();
    await expectHeldAlone(endpoints(), next);
    expect(second, "the second call returns the first call's result").toEqual(first);
    expect(next.token, "the next holder has a token of its own").not.toBe(holder.token);
    await next.release();
  });

  it("two release() calls at once hand the lock over once, and the next holder keeps it", async () => {
    const redlock = new Redlock({ nodes: endpoints() });
    const { holder, waiting } = await holderAndWaiter(redlock, "release-together");
    const [first, second] = await Promise.all([holder.release(), holder.release()]);
    const next = await waiting;
    await sleep(200);
    await expectHeldAlone(endpoints(), next);
    expect(second, "the second call returns the first call's result").toEqual(first);
    await next.release();
  });

  it("using() whose routine releases the lock itself: its final release leaves the next holder's keys alone", async () => {
    const redlock = new Redlock({ nodes: endpoints() });
    const key = uniqueKey("release-in-using");
    let entered: () => void = () => {};
    const inRoutine = new Promise<void>((resolve) => (entered = resolve));
    const using = redlock.using(key, 10_000, async (_signal, lock) => {
      entered();
      await sleep(WAITER_SETTLES_MS);
      await lock.release();
      return lock.token;
    });
    await inRoutine;
    const waiting = redlock.acquire(key, 10_000);
    const previousToken = await using;
    const next = await waiting;
    // using() has run its own release in `finally` by now.
    await expectHeldAlone(endpoints(), next);
    expect(next.token, "the next holder has a token of its own").not.toBe(previousToken);
    await next.release();
  });
});

describe("B: a late compare-and-PEXPIRE with the previous holder's token", () => {
  it("B1: the releaser's own shorter extend(), still in flight at its release, leaves the next holder's claim backed", async () => {
    const held = holdingFetch(endpoints());
    const redlock = new Redlock({ nodes: endpoints().map((e) => ({ ...e, fetch: held.fetch })) });
    const { holder, waiting } = await holderAndWaiter(redlock, "b1-extend-in-flight");
    // The extension to 2,345 ms reaches every node 150 ms late: after the release.
    const extension = held.arm({ match: (args) => carries(args, 2345), phase: "request", ms: 150 });
    const extending = holder.extend(2345).catch(() => undefined);
    await holder.release();
    const next = await waiting;
    await extending;
    await extension.done;
    expect(extension.held(), "extension requests held back").toBeGreaterThanOrEqual(3);
    await sleep(100);
    await expectHeldAlone(endpoints(), next);
    await next.release();
  });

  it.each([
    {
      name: "B2: the next holder's longer extend() is not cut back by the release's late requests",
      key: "b2-longer-overtaken",
      // Every request of the release (the ones that carry the releasing token) lands 150 ms late.
      phase: "request" as const,
      extendMs: 30_000,
    },
    {
      name: "B3: late answers of the release do not raise the next holder's claim over its shorter extend()",
      key: "b3-shorter-then-late",
      // The release's requests land at once; their answers are read 150 ms late.
      phase: "response" as const,
      extendMs: 2000,
    },
  ])("$name", async ({ key, phase, extendMs }) => {
    const held = holdingFetch(endpoints());
    const redlock = new Redlock({ nodes: endpoints().map((e) => ({ ...e, fetch: held.fetch })) });
    const { holder, waiting } = await holderAndWaiter(redlock, key);
    const release = held.arm({ match: (args) => carries(args, holder.token), phase, ms: 150 });
    const releasing = holder.release();
    const next = await waiting;
    await next.extend(extendMs);
    await releasing;
    await release.done;
    expect(release.held(), "release requests held back").toBeGreaterThanOrEqual(3);
    await sleep(100);
    await expectHeldAlone(endpoints(), next);
    await next.release();
  });

  it("B4: extend and release by the previous holder's token, from another client, touch nothing", async () => {
    const redlock = new Redlock({ nodes: endpoints() });
    const { key, holder, waiting } = await holderAndWaiter(redlock, "b4-by-token");
    await holder.release();
    const next = await waiting;
    const other = foreignClient(endpoints());
    const extended = await other.extend(key, holder.token, 1500).then(
      (report) => report,
      (error: unknown) => error,
    );
    expect(extended, "extend by the previous holder's token").toBeInstanceOf(ExtendError);
    const released = await other.release(key, holder.token);
    expect(released.released, "release by the previous holder's token").toBe(0);
    await expectHeldAlone(endpoints(), next);
    await next.release();
  });
});

describe("P: a grant by any path has more than minValidityMs left", () => {
  it("a waiter with minValidityMs at 93 % of its TTL never gets a lock at or below it, nor an aborted signal", async () => {
    const minValidityMs = 9300;
    const redlock = new Redlock({ nodes: endpoints() });
    for (let round = 0; round < 3; round++) {
      // The holder keeps its lock 700 ms of 10 s: about 9.2 s of its claim is left at the release.
      const key = uniqueKey("p-min-validity");
      const holder = await redlock.acquire(key, 10_000);
      const waiting = redlock.acquire(key, 10_000, { minValidityMs });
      // What the caller sees as acquire() resolves, before any later answer can move the claim.
      const granted = waiting.then((lock) => ({ lock, remaining: lock.remainingMs(), signal: lock.signal }));
      granted.catch(() => undefined);
      await sleep(700);
      const releasing = holder.release();
      const { lock: next, remaining, signal } = await granted;
      expect(remaining, `round ${round}: remainingMs() as acquire() resolved`).toBeGreaterThan(minValidityMs);
      expect(next.acquireReport.validityMs, `round ${round}: the grant's validity`).toBeGreaterThan(minValidityMs);
      await sleep(5);
      expect(signal.aborted, `round ${round}: the signal right after the grant`).toBe(false);
      await releasing;
      const audit = await auditClaim(endpoints(), next);
      expect(audit.violation).toBeUndefined();
      await next.release();
    }
  });
});
