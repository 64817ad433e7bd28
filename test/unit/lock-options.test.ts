/**
 * A lock carries the options it was acquired with for its whole life (per-call options included),
 * and offers a local check before a side effect.
 */

import { describe, expect, it, vi } from "vitest";
import { extendScript } from "../../src/core/scripts/extend.js";
import { LockLostError, Redlock, type RedlockOptions } from "../../src/index.js";
import { type FakeNode, fakeClock, fakeNodes } from "./support/fake-node.js";
import { run, useFakeTime } from "./support/fake-time.js";

function client(nodes: FakeNode[], options: RedlockOptions = {}) {
  return new Redlock({ nodes, clock: fakeClock, retryDelay: () => 50, ...options });
}

useFakeTime();

/** Counts the extension scripts each node received. */
function extensionsSent(node: FakeNode): number {
  return node.log.filter((args) => args[0] === "EVALSHA" && args[1] === extendScript.sha1).length;
}

describe("per-call options reach the lock's later operations", () => {
  it("using(…, { maxExtensions: 1 }): one extension, then the signal aborts before expiry", async () => {
    const nodes = fakeNodes(3);
    let aborted: unknown;
    let remainingAtAbort = Number.NaN;
    const outcome = await run(
      client(nodes).using(
        "r",
        500,
        async (signal, lock) => {
          signal.addEventListener("abort", () => {
            aborted = signal.reason;
            remainingAtAbort = lock.remainingMs();
          });
          await new Promise((r) => setTimeout(r, 1600));
        },
        { maxExtensions: 1 },
      ),
    ).catch((e: unknown) => e);
    // The routine ignored the signal and outlived the lock: using() says so.
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(extensionsSent(nodes[0] as FakeNode)).toBe(1);
    expect(aborted).toBeInstanceOf(LockLostError);
    expect(remainingAtAbort).toBeGreaterThan(0);
  });

  it("using(…, { maxHoldMs: 800 }): the lock is not held past 800 ms", async () => {
    const nodes = fakeNodes(3);
    let lastValidAt = 0;
    const started = Date.now();
    const outcome = await run(
      client(nodes).using(
        "r",
        500,
        async (_signal, lock) => {
          for (let i = 0; i < 40; i++) {
            if (lock.remainingMs() > 0) lastValidAt = Date.now() - started;
            await new Promise((r) => setTimeout(r, 50));
          }
        },
        { maxHoldMs: 800 },
      ),
    ).catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LockLostError);
    expect(lastValidAt).toBeLessThanOrEqual(800);
  });

  it("acquire(…, { quorum: 4 }) then extend(): the extension needs 4 nodes too", async () => {
    const nodes = fakeNodes(5);
    const lock = await run(client(nodes).acquire("r", 1000, { quorum: 4 }));
    expect(lock.options.quorum).toBe(4);
    // Two nodes lose the key: 3 of 5 still hold it, a majority but not the lock's quorum.
    (nodes[0] as FakeNode).store.delete("r");
    (nodes[1] as FakeNode).store.delete("r");
    const error = await run(lock.extend()).catch((e) => e);
    expect(error).toMatchObject({ code: "EXTEND_FAILED" });
    expect(error.attempts[0].quorum).toBe(4);
  });

  it("hooks, driftFactor, minValidityMs and requestTimeoutMs given per call hold for extend, verify and release", async () => {
    const nodes = fakeNodes(3);
    const onAttempt = vi.fn();
    const onNodeError = vi.fn();
    const lock = await run(
      client(nodes).acquire("r", 1000, {
        onAttempt,
        onNodeError,
        driftFactor: 0.2,
        minValidityMs: 300,
        requestTimeoutMs: 40,
      }),
    );
    expect(lock.options).toMatchObject({ driftFactor: 0.2, minValidityMs: 300, requestTimeoutMs: 40 });
    (nodes[2] as FakeNode).behaviour = { kind: "hang" };
    const report = await run(lock.extend(1000));
    // drift = floor(1000 * 0.2) + 2
    expect(report.validityMs).toBeLessThanOrEqual(1000 - 202);
    // Each operation settles on two answers; the hanging node's deadline passes meanwhile.
    await vi.advanceTimersByTimeAsync(100);
    await run(lock.verify());
    await vi.advanceTimersByTimeAsync(100);
    await run(lock.release());
    await vi.advanceTimersByTimeAsync(100);
    expect(onAttempt.mock.calls.map(([r]) => r.operation)).toEqual(["acquire", "extend", "verify", "release"]);
    // The hanging node timed out at the per-call 40 ms deadline in each of the three operations.
    const timeouts = onNodeError.mock.calls.filter(([e]) => e.outcome.outcome === "timeout");
    expect(timeouts.map(([e]) => e.operation)).toEqual(["extend", "verify", "release"]);
    for (const [e] of timeouts) expect(e.outcome.latencyMs).toBeLessThan(60);
  });

  it("extend(ttl, overrides) overrides for that call only", async () => {
    const nodes = fakeNodes(5);
    const lock = await run(client(nodes).acquire("r", 1000));
    await run(lock.extend(1000, { quorum: 5 }));
    (nodes[0] as FakeNode).store.delete("r");
    await expect(run(lock.extend(1000, { quorum: 5 }))).rejects.toMatchObject({ code: "EXTEND_FAILED" });
    await expect(run(lock.extend(1000))).resolves.toMatchObject({ ok: true, quorum: 3 });
  });
});

describe("lock.assertHeld()", () => {
  it("passes while validity is left above the margin and throws LockLostError below it", async () => {
    const nodes = fakeNodes(3);
    const lock = await run(client(nodes, { minValidityMs: 100 }).acquire("r", 1000));
    expect(() => lock.assertHeld()).not.toThrow();
    expect(() => lock.assertHeld(lock.remainingMs() + 1)).toThrow(LockLostError);
    vi.setSystemTime(Date.now() + lock.remainingMs() - 50);
    // The clock moved with no timer run (a stalled event loop): the local check still sees it.
    expect(() => lock.assertHeld()).toThrow(LockLostError);
    expect(() => lock.assertHeld(0)).not.toThrow();
  });

  it("throws after release and after the lock was lost", async () => {
    const nodes = fakeNodes(3);
    const lock = await run(client(nodes).acquire("r", 1000));
    await run(lock.release());
    expect(() => lock.assertHeld(0)).toThrow(/released/);
    const other = await run(client(nodes).acquire("s", 1000));
    for (const n of nodes) n.store.set("s", { value: "thief", expiresAt: Date.now() + 5000 });
    await run(other.extend()).catch(() => {});
    expect(() => other.assertHeld(0)).toThrow(LockLostError);
  });
});

describe("a failed extension", () => {
  it("that shortened the keys on the nodes it reached late claims no more than the shorter TTL", async () => {
    const nodes = fakeNodes(3);
    const lock = await run(client(nodes, { requestTimeoutMs: 50 }).acquire("r", 3000));
    // Two nodes apply the PEXPIRE after the deadline: the extension fails, yet their keys now
    // expire 600 ms after it, long before the 3 s the lock held before.
    for (const n of nodes.slice(1)) n.behaviour = { kind: "late", latencyMs: 100 };
    await expect(run(lock.extend(600))).rejects.toMatchObject({ code: "EXTEND_FAILED" });
    await vi.advanceTimersByTimeAsync(200);
    const expiries = nodes.map((n) => (n.get("r") === lock.token ? (n.store.get("r")?.expiresAt ?? 0) : 0));
    const quorumExpiry = [...expiries].sort((a, b) => b - a)[1] as number;
    expect(Date.now() + lock.remainingMs()).toBeLessThanOrEqual(quorumExpiry);
  });
});
