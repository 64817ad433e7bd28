/**
 * Findings of a hostile-input audit in the core: unknown and unbounded options, retry policies
 * that return nonsense, a time budget that must lift the attempt count, the attempts of a
 * configuration error, a finite verify() result, and a settled() that always ends.
 */
import { describe, expect, it } from "vitest";
import {
  AcquireTimeoutError,
  ConfigurationError,
  InvalidArgumentError,
  type RedisNode,
  Redlock,
  type RedlockOptions,
} from "../../src/index.js";
import { type FakeNode, fakeClock, fakeNodes } from "./support/fake-node.js";
import { run, useFakeTime } from "./support/fake-time.js";

function client(nodes: RedisNode[], options: RedlockOptions = {}) {
  return new Redlock({ nodes, clock: fakeClock, ...options });
}

useFakeTime();

describe("unknown option names", () => {
  it.each([
    ["retryDelayMs", "retryDelay"],
    ["requestTimeout", "requestTimeoutMs"],
    ["qourum", "quorum"],
    ["leaseRenewal", undefined],
  ])("new Redlock({ %s }) → ConfigurationError naming it (closest: %s)", (name, closest) => {
    const error = (() => {
      try {
        new Redlock({ nodes: fakeNodes(3), [name]: 5 } as never);
      } catch (e) {
        return e as Error;
      }
    })();
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error?.message).toContain(JSON.stringify(name));
    if (closest) expect(error?.message).toContain(`did you mean ${JSON.stringify(closest)}`);
  });

  it("a per-call typo → InvalidArgumentError before anything is sent", async () => {
    const nodes = fakeNodes(3);
    await expect(client(nodes).acquire("r", 1000, { maxAttempt: 3 } as never)).rejects.toThrow(
      /unknown option "maxAttempt".*did you mean "maxAttempts"/,
    );
    expect(nodes.every((n) => n.log.length === 0)).toBe(true);
  });
});

describe("milliseconds beyond what timers honour", () => {
  it.each(["requestTimeoutMs", "retryMaxDelayMs", "acquireTimeoutMs", "maxHoldMs", "minValidityMs"])(
    "%s above 2^31-1 → ConfigurationError",
    (name) => {
      expect(() => new Redlock({ nodes: fakeNodes(3), [name]: 2 ** 31 } as never)).toThrow(ConfigurationError);
    },
  );

  it.each([
    ["above 2^31-1", 2 ** 31],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["NaN", Number.NaN],
    ["negative", -1],
    ["a string", "100"],
  ])("retryDelay returning %s → InvalidArgumentError, no hot loop", async (_, value) => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r");
    const error = await run(client(nodes, { retryDelay: () => value as number }).acquire("r", 1000)).catch((e) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(nodes[0]?.lockLog).toHaveLength(1);
  });

  it("a throwing retryDelay surfaces as a RedlockError with the cause", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r");
    const boom = new Error("boom");
    const error = await run(
      client(nodes, {
        retryDelay: () => {
          throw boom;
        },
      }).acquire("r", 1000),
    ).catch((e) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error.cause).toBe(boom);
    expect(error.attempts).toHaveLength(1);
  });
});

describe("acquireTimeoutMs", () => {
  it("bounds the attempts by time, not by the default maxAttempts", async () => {
    // Two of three nodes fail: fan-outs at retryDelay's pace, for as long as the deadline allows
    // (with no request budget: it would end them first, see "requestBudget" below).
    const nodes = fakeNodes(3);
    for (const n of nodes.slice(1)) n.behaviour = { kind: "error" };
    const started = Date.now();
    const error = await run(
      client(nodes, { acquireTimeoutMs: 20_000, retryDelay: () => 500, requestBudget: Infinity }).acquire("r", 1000),
      50,
    ).catch((e) => e);
    expect(error).toBeInstanceOf(AcquireTimeoutError);
    expect(error.attempts.length).toBeGreaterThan(10);
    expect(Date.now() - started).toBeGreaterThanOrEqual(19_000);
    expect(error.message).toContain("within 20000 ms");
  });

  it("an explicit maxAttempts still applies alongside it: fan-outs while nodes fail", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes.slice(1)) n.behaviour = { kind: "error" };
    const error = await run(
      client(nodes, { acquireTimeoutMs: 20_000, maxAttempts: 3, retryDelay: () => 500 }).acquire("r", 1000),
    ).catch((e) => e);
    expect(error.attempts).toHaveLength(3);
  });

  it("an explicit maxAttempts still applies alongside it: in line, as the patience its retry delays add up to", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r", "foreign", 10 * 60_000);
    const started = Date.now();
    const error = await run(
      client(nodes, { acquireTimeoutMs: 20_000, maxAttempts: 3, retryDelay: () => 500 }).acquire("r", 1000),
    ).catch((e) => e);
    expect(error.code).toBe("LOCK_HELD");
    // Two delays of 500 ms between three attempts: a second of waiting in line, not 20 s.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

describe("error data", () => {
  it("the ConfigurationError thrown when rejected tokens cost the quorum carries the attempt", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes.slice(0, 2)) n.behaviour = { kind: "unauthorized" };
    const error = await run(client(nodes).acquire("r", 1000)).catch((e) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error.attempts).toHaveLength(1);
    expect(error.nodes.filter((n: { outcome: string }) => n.outcome === "error")).toHaveLength(2);
  });

  it("verify() of a lock no quorum holds returns a finite remainingMs of at most 0", async () => {
    const nodes = fakeNodes(3);
    const lock = await run(client(nodes).acquire("r", 1000));
    for (const n of nodes) n.store.delete("r");
    const result = await run(lock.verify());
    expect(result.held).toBe(false);
    expect(Number.isFinite(result.remainingMs)).toBe(true);
    expect(result.remainingMs).toBeLessThanOrEqual(0);
  });
});

describe("settled()", () => {
  it("ends when a custom node ignores its abort signal, and reports the abandoned work", async () => {
    const good = fakeNodes(2);
    const stuck: RedisNode = { id: "stuck", command: () => new Promise(() => {}) };
    const redlock = client([...good, stuck] as RedisNode[], { requestTimeoutMs: 50, maxAttempts: 1 });
    for (const n of good as FakeNode[]) n.occupy("r");
    await run(redlock.acquire("r", 1000)).catch(() => {});
    const result = await run(redlock.settled(), 50);
    expect(result.abandoned).toBeGreaterThanOrEqual(1);
  });
});

describe("options brought from other libraries say what to write instead", () => {
  it.each([
    [{ retryCount: 10 }, /maxAttempts \(attempts in all/],
    [{ retryJitter: 200 }, /retryDelay: \(\) => ms, a function/],
    [{ automaticExtensionThreshold: 500 }, /autoExtendThreshold, a fraction of the TTL/],
    [{ lease: 5000 }, /the ttlMs argument/],
    [{ retry: { attempts: 3, delay: 100 } }, /maxAttempts, and retryDelay/],
  ])("%o", (given, message) => {
    expect(() => new Redlock({ nodes: fakeNodes(3), ...(given as object) })).toThrow(message);
  });

  it("retryDelay: 200 (node-redlock's number) shows the function to write", () => {
    const build = () => new Redlock({ nodes: fakeNodes(3), retryDelay: 200 as never });
    expect(build).toThrow(ConfigurationError);
    expect(build).toThrow(/retryDelay: \(\) => 200/);
  });
});
