import { describe, expect, it, vi } from "vitest";
import { Redlock as PlainRedlock } from "../../src/core/index.js";
import {
  AbortedError,
  AcquireTimeoutError,
  ConfigurationError,
  ExtendError,
  ExtensionLimitError,
  InvalidArgumentError,
  isRedlockError,
  LockExpiredError,
  LockHeldError,
  LockLostError,
  QuorumUnavailableError,
  Redlock,
  type RedlockOptions,
  ValidityExhaustedError,
} from "../../src/index.js";
import { type FakeNode, fakeClock, fakeNodes } from "./support/fake-node.js";
import { run, useFakeTime } from "./support/fake-time.js";

function client(nodes: FakeNode[], options: RedlockOptions = {}) {
  return new Redlock({ nodes, clock: fakeClock, retryDelay: () => 50, ...options });
}

useFakeTime();

describe("validity arithmetic", () => {
  it("anchors the deadline before the first send: ttl - elapsed - drift", async () => {
    const nodes = fakeNodes(5);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 100 };
    const lock = await run(client(nodes, { requestTimeoutMs: 500 }).acquire("r", 1000), 1);
    // 100 ms of round trip, drift floor(1000 * 0.01) + 2 = 12.
    expect(lock.acquireReport.elapsedMs).toBe(100);
    expect(lock.acquireReport.validityMs).toBe(1000 - 100 - 12);
    expect(lock.remainingMs()).toBe(888);
    vi.advanceTimersByTime(300);
    expect(lock.remainingMs()).toBe(588);
  });

  it("refuses a quorum whose validity is used up and releases it", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 950 };
    const redlock = client(nodes, { maxAttempts: 1, requestTimeoutMs: 2000 });
    const error = await run(redlock.acquire("r", 1000), 5).catch((e) => e);
    expect(error).toBeInstanceOf(ValidityExhaustedError);
    expect(error.attempts[0].validityMs).toBe(1000 - 950 - 12);
    await run(redlock.settled());
    for (const n of nodes) expect(n.get("r")).toBeUndefined();
  });
});

describe("early settlement", () => {
  it("succeeds once a quorum said yes, without waiting for hanging nodes", async () => {
    const nodes = fakeNodes(5);
    for (const n of nodes.slice(0, 3)) n.behaviour = { kind: "ok", latencyMs: 20 };
    for (const n of nodes.slice(3)) n.behaviour = { kind: "hang" };
    const lock = await run(client(nodes, { requestTimeoutMs: 1000 }).acquire("r", 10_000), 1);
    expect(lock.acquireReport.elapsedMs).toBe(20);
    expect(lock.acquireReport.nodes.map((n) => n.outcome)).toEqual([
      "acquired",
      "acquired",
      "acquired",
      "pending",
      "pending",
    ]);
  });

  it("fails as soon as a quorum became impossible", async () => {
    const nodes = fakeNodes(5);
    for (const n of nodes.slice(0, 3)) {
      n.occupy("r");
      n.behaviour = { kind: "ok", latencyMs: 20 };
    }
    for (const n of nodes.slice(3)) n.behaviour = { kind: "hang" };
    const error = await run(client(nodes, { maxAttempts: 1, requestTimeoutMs: 1000 }).acquire("r", 10_000), 1).catch(
      (e) => e,
    );
    expect(error).toBeInstanceOf(LockHeldError);
    expect(error.attempts[0].elapsedMs).toBe(20);
    expect(error.heldOn).toEqual(["n0", "n1", "n2"]);
  });

  it("settles a 2-2 split on four nodes instead of hanging", async () => {
    const nodes = fakeNodes(4);
    nodes[0]?.occupy("r");
    nodes[1]?.occupy("r");
    const error = await run(client(nodes, { maxAttempts: 1 }).acquire("r", 10_000), 1).catch((e) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    // Two "held" already rule out 3 of 4: refused without waiting for the rest.
    expect(error.attempts[0].votes).toBeLessThan(3);
  });

  it("times out a slow node at the per-request deadline", async () => {
    const nodes = fakeNodes(3);
    nodes[2]!.behaviour = { kind: "hang" };
    nodes[1]!.behaviour = { kind: "error" };
    const error = await run(client(nodes, { maxAttempts: 1, requestTimeoutMs: 200 }).acquire("r", 10_000), 1).catch(
      (e) => e,
    );
    expect(error).toBeInstanceOf(QuorumUnavailableError);
    const [, errored, slow] = error.attempts[0].nodes;
    expect(errored.outcome).toBe("error");
    expect(slow.outcome).toBe("timeout");
    expect(slow.latencyMs).toBe(200);
  });
});

describe("cleanup after failure", () => {
  it("releases a straggler whose SET lands after the attempt failed", async () => {
    const nodes = fakeNodes(5);
    for (const n of nodes.slice(0, 3)) n.occupy("r");
    // n4 applies the SET late, after its deadline and after the vote.
    nodes[4]!.behaviour = { kind: "late", latencyMs: 500 };
    const redlock = client(nodes, { maxAttempts: 1, requestTimeoutMs: 100 });
    const error = await run(redlock.acquire("r", 10_000), 1).catch((e) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    nodes[4]!.behaviour = { kind: "ok" };
    await run(redlock.settled(), 10);
    expect(nodes[4]!.get("r")).toBeUndefined();
    expect(nodes[3]!.get("r")).toBeUndefined();
    // The foreign holders are untouched.
    for (const n of nodes.slice(0, 3)) expect(n.get("r")).toBe("foreign");
  });

  it("does not send a release to nodes that definitely said held", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r");
    const redlock = client(nodes, { maxAttempts: 1 });
    await run(redlock.acquire("r", 10_000), 1).catch(() => {});
    await run(redlock.settled());
    for (const n of nodes) expect(n.lockLog.map((c) => c[0])).toEqual(["SET"]);
  });
});

/** A client of the plain preset, which waits by backoff alone: every retry is a fan-out. */
function plainClient(nodes: FakeNode[], options: RedlockOptions = {}) {
  return new PlainRedlock({ nodes, clock: fakeClock, retryDelay: () => 50, ...options });
}

describe("retries (the plain preset, edge-redlock/core: backoff alone)", () => {
  it("makes maxAttempts attempts with the custom delay between them", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r");
    const delays: number[] = [];
    const redlock = plainClient(nodes, {
      maxAttempts: 4,
      retryDelay: ({ attempt }) => {
        delays.push(attempt);
        return 100 * attempt;
      },
    });
    const started = Date.now();
    const error = await run(redlock.acquire("r", 10_000), 1).catch((e) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    expect(error.attempts).toHaveLength(4);
    expect(delays).toEqual([1, 2, 3]);
    // 600 ms of backoff plus one fake-timer tick per attempt.
    expect(Date.now() - started).toBeGreaterThanOrEqual(600);
    expect(Date.now() - started).toBeLessThan(610);
  });

  it("stops when the retry policy returns null", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r");
    const error = await run(plainClient(nodes, { retryDelay: () => null }).acquire("r", 10_000), 1).catch((e) => e);
    expect(error.attempts).toHaveLength(1);
  });

  it("acquires once the holder lets go", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r", "foreign", 120);
    const lock = await run(plainClient(nodes).acquire("r", 10_000), 1);
    expect(lock.acquireReport.attempt).toBe(4);
  });

  it("gives up with AcquireTimeoutError at the acquire deadline", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r");
    const error = await run(plainClient(nodes, { acquireTimeoutMs: 120 }).acquire("r", 10_000), 1).catch((e) => e);
    expect(error).toBeInstanceOf(AcquireTimeoutError);
    expect(error.attempts).toHaveLength(3);
  });

  it("stops on the caller's abort, during an attempt or a backoff", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r");
    const controller = new AbortController();
    const pending = plainClient(nodes).acquire("r", 10_000, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error("shutdown")), 75);
    const error = await run(pending, 1).catch((e) => e);
    expect(error).toBeInstanceOf(AbortedError);
    expect(error.cause).toEqual(new Error("shutdown"));
    expect(Date.now() - 1_000_000).toBeLessThan(80);
  });

  it("fails fast, without retrying, when rejected tokens cost the quorum", async () => {
    const nodes = fakeNodes(3);
    nodes[0]!.behaviour = { kind: "unauthorized" };
    nodes[1]!.behaviour = { kind: "unauthorized" };
    const error = await run(plainClient(nodes).acquire("r", 10_000), 1).catch((e) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(nodes[2]!.log.filter((c) => c[0] === "SET")).toHaveLength(1);
  });

  it("still grants with one misconfigured node, and reports it through onNodeError", async () => {
    const nodes = fakeNodes(3);
    nodes[0]!.behaviour = { kind: "unauthorized" };
    const onNodeError = vi.fn();
    const lock = await run(plainClient(nodes, { onNodeError }).acquire("r", 10_000), 1);
    expect(lock.acquireReport.votes).toBe(2);
    expect(onNodeError).toHaveBeenCalledTimes(1);
    expect(onNodeError.mock.calls[0]?.[0].outcome.error).toBeInstanceOf(ConfigurationError);
  });
});

describe("retries of the default client: a held lock is waited for in line, whatever the retry options", () => {
  it("waits in line behind a held lock as long as the custom delays add up to, asking retryDelay once per attempt number", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r");
    const asked: number[] = [];
    const redlock = client(nodes, {
      maxAttempts: 4,
      retryDelay: ({ attempt }) => {
        asked.push(attempt);
        return 100 * attempt;
      },
    });
    const started = Date.now();
    const error = await run(redlock.acquire("r", 10_000), 1).catch((e) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    expect(asked.slice(0, 3)).toEqual([1, 2, 3]);
    // 600 ms of patience, and polls of the gate, not fan-outs, meanwhile.
    expect(Date.now() - started).toBeGreaterThanOrEqual(600);
    expect(error.attempts.length).toBeLessThanOrEqual(2);
    expect(nodes.every((n) => n.log.filter((c) => c[0] === "SET").length <= 2)).toBe(true);
  });

  it("paces fan-outs with the custom delay while nodes fail", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes.slice(1)) n.behaviour = { kind: "error" };
    const redlock = client(nodes, { maxAttempts: 4, retryDelay: ({ attempt }) => 100 * attempt });
    const started = Date.now();
    const error = await run(redlock.acquire("r", 10_000), 1).catch((e) => e);
    expect(error).toBeInstanceOf(QuorumUnavailableError);
    expect(error.attempts).toHaveLength(4);
    expect(Date.now() - started).toBeGreaterThanOrEqual(600);
  });

  it("acquires once the holder lets go, with one fan-out besides the take", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r", "foreign", 120);
    const lock = await run(client(nodes).acquire("r", 10_000), 1);
    expect(lock.acquireReport.attempt).toBeLessThanOrEqual(2);
  });
});

describe("tryAcquire", () => {
  it("returns null when held elsewhere after a single attempt", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r");
    expect(await run(client(nodes).tryAcquire("r", 10_000), 1)).toBeNull();
    expect(nodes[0]!.lockLog).toHaveLength(1);
  });

  it("throws when the nodes are down, so an outage is not mistaken for contention", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.behaviour = { kind: "error" };
    await expect(run(client(nodes).tryAcquire("r", 10_000), 1)).rejects.toBeInstanceOf(QuorumUnavailableError);
  });
});

describe("isRedlockError", () => {
  it("narrows to the class of the code it is given", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.occupy("r");
    const error: unknown = await run(client(nodes).acquire("r", 10_000, { maxAttempts: 1 }), 1).catch((e) => e);
    expect(isRedlockError(error)).toBe(true);
    expect(isRedlockError(error, "QUORUM_UNAVAILABLE")).toBe(false);
    if (!isRedlockError(error, "LOCK_HELD")) throw new Error("expected LOCK_HELD");
    // `heldOn` type-checks only once the code has narrowed `error` to a LockHeldError.
    expect(error.heldOn.length).toBeGreaterThanOrEqual(2);
    expect(error).toBeInstanceOf(LockHeldError);
    expect(isRedlockError(new Error("not ours"), "LOCK_HELD")).toBe(false);
  });
});

describe("multi-resource locks", () => {
  it("sorts the keys and takes all or none on each node", async () => {
    const nodes = fakeNodes(3);
    nodes[0]!.occupy("lock:b");
    const lock = await run(client(nodes, { keyPrefix: "lock:" }).acquire(["c", "b", "a"], 10_000), 1).catch((e) => e);
    // b is taken on n0, so nothing was written there, but n1 and n2 make a quorum.
    expect(lock.resources).toEqual(["a", "b", "c"]);
    expect(lock.keys).toEqual(["lock:a", "lock:b", "lock:c"]);
    expect(nodes[0]!.get("lock:a")).toBeUndefined();
    expect(nodes[1]!.get("lock:a")).toBe(lock.token);
    expect(nodes[1]!.lockLog[0]?.slice(0, 6)).toEqual(["EVALSHA", expect.any(String), 3, "lock:a", "lock:b", "lock:c"]);
  });

  it("falls back to EVAL on NOSCRIPT and counts both requests", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.scriptCache.clear();
    const lock = await run(client(nodes).acquire(["a", "b"], 10_000), 1);
    expect(nodes[0]!.lockLog.map((c) => c[0])).toEqual(["EVALSHA", "EVAL"]);
    const answered = lock.acquireReport.nodes.filter((n) => n.outcome === "acquired");
    expect(answered.length).toBeGreaterThanOrEqual(2);
    expect(answered.every((n) => n.requests === 2)).toBe(true);
    expect(lock.acquireReport.requests).toBeGreaterThanOrEqual(4);
  });
});

describe("extend and release", () => {
  it("extends with the same token and a validity measured from the extend", async () => {
    const nodes = fakeNodes(3);
    const lock = await run(client(nodes).acquire("r", 1000), 1);
    vi.advanceTimersByTime(500);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 30 };
    const report = await run(lock.extend(2000), 1);
    expect(report.validityMs).toBe(2000 - 30 - 22);
    expect(lock.remainingMs()).toBe(2000 - 30 - 22);
    expect(lock.extensions).toBe(1);
    for (const n of nodes) expect(n.get("r")).toBe(lock.token);
  });

  it("extends a node whose acquire request is still on its way once that request has landed, not before it", async () => {
    // The acquisition settles at a quorum; an extension sent at once could overtake the slower
    // SETs and find no key there, and those SETs would then set the keys to the acquisition's TTL.
    const nodes = fakeNodes(5);
    for (const n of nodes.slice(3)) {
      n.latency = (args) => ({ requestMs: args[0] === "SET" ? 80 : 1, replyMs: 1 });
    }
    const redlock = client(nodes);
    const lock = await run(redlock.acquire("r", 1000), 1);
    expect(lock.acquireReport.nodes.map((n) => n.outcome)).toEqual([
      "acquired",
      "acquired",
      "acquired",
      "pending",
      "pending",
    ]);
    const extendedAt = Date.now();
    await run(lock.extend(30_000), 1);
    await run(redlock.settled(), 1);
    await vi.advanceTimersByTimeAsync(2000);
    for (const n of nodes) {
      expect(n.get("r")).toBe(lock.token);
      expect(n.store.get("r")!.expiresAt).toBeGreaterThanOrEqual(extendedAt + 30_000);
    }
    // The client's cluster check, the SET, one extension: the extension was not sent twice.
    expect(nodes[4]!.log.map((c) => c[0])).toEqual(["EVAL", "SET", "EVALSHA"]);
  });

  it("two extensions and a release sent while the acquisition's SETs are on their way leave no key", async () => {
    const nodes = fakeNodes(5);
    for (const n of nodes.slice(3)) {
      n.latency = (args) => ({ requestMs: args[0] === "SET" ? 80 : 1, replyMs: 1 });
    }
    const redlock = client(nodes);
    const start = Date.now();
    const lock = await run(redlock.acquire("r", 1000), 1);
    const extensions = Promise.all([lock.extend(30_000), lock.extend(30_000)]);
    const released = lock.release();
    await vi.advanceTimersByTimeAsync(200);
    await extensions.catch(() => {});
    expect((await released).released).toBeGreaterThanOrEqual(3);
    await run(redlock.settled(), 1);
    // Read before the acquisition's own TTL could have emptied the nodes: a key an extension
    // pushed out after a release would still be there.
    expect(Date.now() - start).toBeLessThan(1000);
    for (const n of nodes) expect(n.get("r")).toBeUndefined();
    for (const n of nodes.slice(3)) expect(n.log.filter((c) => c[0] === "SET")).toHaveLength(1);
  });

  it("refuses to extend an expired lock locally and never revives the key", async () => {
    const nodes = fakeNodes(3);
    const lock = await run(client(nodes).acquire("r", 1000), 1);
    vi.advanceTimersByTime(1000);
    await expect(lock.extend()).rejects.toBeInstanceOf(LockExpiredError);
    for (const n of nodes) {
      expect(n.get("r")).toBeUndefined();
      expect(n.lockLog).toHaveLength(1);
    }
  });

  it("enforces maxExtensions and maxHoldMs", async () => {
    const nodes = fakeNodes(3);
    const lock = await run(client(nodes, { maxExtensions: 2 }).acquire("r", 1000), 1);
    await run(lock.extend(), 1);
    await run(lock.extend(), 1);
    await expect(lock.extend()).rejects.toBeInstanceOf(ExtensionLimitError);
    const held = await run(client(nodes, { maxHoldMs: 1500 }).acquire("s", 1000), 1);
    vi.advanceTimersByTime(600);
    await expect(held.extend()).rejects.toBeInstanceOf(ExtensionLimitError);
  });

  it("aborts the signal with LockLostError when an extension finds the lock taken", async () => {
    const nodes = fakeNodes(3);
    const lost = vi.fn();
    const lock = await run(client(nodes, { onLockLost: lost }).acquire("r", 1000), 1);
    for (const n of nodes) n.store.set("r", { value: "thief", expiresAt: Date.now() + 5000 });
    const error = await run(lock.extend(), 1).catch((e) => e);
    expect(error).toBeInstanceOf(ExtendError);
    expect(lock.signal.aborted).toBe(true);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
    expect(lost).toHaveBeenCalledTimes(1);
    for (const n of nodes) expect(n.get("r")).toBe("thief");
  });

  it("aborts the signal before the deadline when the lock is not extended", async () => {
    const nodes = fakeNodes(3);
    const lost = vi.fn();
    const lock = await run(client(nodes, { onLockLost: lost, minValidityMs: 100 }).acquire("r", 1000), 1);
    vi.advanceTimersByTime(lock.remainingMs() - 101);
    expect(lock.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(lock.signal.aborted).toBe(true);
    expect(lock.remainingMs()).toBe(100);
    expect(lost).toHaveBeenCalledTimes(1);
  });

  it("calls an onLockLost given per call, not only the client's", async () => {
    const nodes = fakeNodes(3);
    const clientHook = vi.fn();
    const callHook = vi.fn();
    const lock = await run(client(nodes, { onLockLost: clientHook }).acquire("r", 1000, { onLockLost: callHook }), 1);
    vi.advanceTimersByTime(lock.remainingMs());
    expect(callHook).toHaveBeenCalledTimes(1);
    expect(clientHook).not.toHaveBeenCalled();
  });

  it("releases once with per-node results, also after expiry: a second call sends nothing", async () => {
    const nodes = fakeNodes(3);
    nodes[2]!.behaviour = { kind: "error" };
    const redlock = client(nodes);
    const lock = await run(redlock.acquire("r", 1000), 1);
    for (const n of nodes.slice(0, 2)) n.behaviour = { kind: "ok", latencyMs: 10 };
    const first = await run(lock.release(), 1);
    expect(first.released).toBe(2);
    expect(first.nodes.map((n) => n.outcome)).toEqual(["released", "released", "error"]);
    expect(first.report).toMatchObject({ operation: "release", ok: true, votes: 2 });
    // A second release sends nothing and returns the first one's result.
    const sent = nodes.map((n) => n.log.length);
    const second = await run(lock.release(), 1);
    expect(second).toBe(first);
    expect(nodes.map((n) => n.log.length)).toEqual(sent);
    await run(redlock.settled(), 1);
    for (const n of nodes) expect(n.get("r")).toBeUndefined();
    const expired = await run(client(nodes).acquire("s", 1000), 1);
    vi.advanceTimersByTime(2000);
    await expect(run(expired.release(), 1)).resolves.toMatchObject({ released: 0 });
  });
});

describe("verify", () => {
  it("re-checks on the nodes and takes the smaller of local and server validity", async () => {
    const nodes = fakeNodes(3);
    const lock = await run(client(nodes).acquire("r", 10_000), 1);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 20 };
    // A key was shortened behind our back: the quorum-th longest PTTL rules.
    nodes[1]!.store.set("r", { value: lock.token, expiresAt: Date.now() + 4000 });
    nodes[2]!.store.set("r", { value: lock.token, expiresAt: Date.now() + 3000 });
    const result = await run(lock.verify(), 1);
    expect(result.held).toBe(true);
    // 2nd longest PTTL 4000 read 20 ms ago (the fake applies the script at answer time, so the
    // PTTL is 4000 - 20), less the round trip and drift floor(3980 * 0.01) + 2.
    expect(result.remainingMs).toBe(3980 - 20 - 41);
    expect(result.report.operation).toBe("verify");
  });

  it("reports a lock taken away and aborts its signal", async () => {
    const nodes = fakeNodes(3);
    const lock = await run(client(nodes).acquire("r", 10_000), 1);
    for (const n of nodes.slice(0, 2)) n.store.delete("r");
    const result = await run(lock.verify(), 1);
    expect(result.held).toBe(false);
    expect(result.remainingMs).toBeLessThanOrEqual(0);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
  });
});

describe("locks known by resources and token", () => {
  it("extends and releases from another client, never reviving or touching foreign keys", async () => {
    const nodes = fakeNodes(3);
    const lock = await run(client(nodes).acquire(["a", "b"], 1000), 1);
    const other = client(nodes);
    const report = await run(other.extend(["b", "a"], lock.token, 5000), 1);
    expect(report.ok).toBe(true);
    await expect(run(other.extend("a", "not-the-token", 5000), 1)).rejects.toBeInstanceOf(ExtendError);
    const released = await run(other.release(["a", "b"], lock.token), 1);
    expect(released.released).toBeGreaterThanOrEqual(2);
    await run(other.settled(), 1);
    for (const n of nodes) expect(n.get("a")).toBeUndefined();
    await expect(run(other.extend(["a", "b"], lock.token, 5000), 1)).rejects.toBeInstanceOf(ExtendError);
    for (const n of nodes) expect(n.get("a")).toBeUndefined();
  });

  it("validates the token", async () => {
    await expect(client(fakeNodes(3)).release("a", "")).rejects.toBeInstanceOf(InvalidArgumentError);
  });
});

describe("using", () => {
  it("extends automatically and releases at the end", async () => {
    const nodes = fakeNodes(3);
    const result = await run(
      client(nodes).using("r", 1000, async (signal, lock) => {
        await new Promise((r) => setTimeout(r, 3000));
        expect(signal.aborted).toBe(false);
        expect(lock.extensions).toBeGreaterThanOrEqual(5);
        return "done";
      }),
      1,
    );
    expect(result).toBe("done");
    for (const n of nodes) expect(n.get("r")).toBeUndefined();
  });

  it("aborts the routine's signal before the deadline when extensions fail, and onLockLost fires once", async () => {
    const nodes = fakeNodes(3);
    const lost = vi.fn();
    let abortedAtRemaining: number | undefined;
    const error = await run(
      client(nodes, { onLockLost: lost }).using("r", 1000, async (signal, lock) => {
        for (const n of nodes) n.behaviour = { kind: "error" };
        await new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => {
            abortedAtRemaining = lock.remainingMs();
            resolve();
          }),
        );
        throw signal.reason;
      }),
      1,
    ).catch((e) => e);
    expect(error).toBeInstanceOf(LockLostError);
    expect(abortedAtRemaining).toBeGreaterThan(0);
    expect(lost).toHaveBeenCalledTimes(1);
  });

  it("lets the routine's error win over a failed release, which goes to onReleaseError", async () => {
    const nodes = fakeNodes(3);
    const releaseErrors = vi.fn();
    const error = await run(
      client(nodes, { onReleaseError: releaseErrors }).using("r", 1000, async () => {
        for (const n of nodes) n.behaviour = { kind: "error" };
        throw new Error("routine failed");
      }),
      1,
    ).catch((e) => e);
    expect(error).toEqual(new Error("routine failed"));
    expect(releaseErrors).toHaveBeenCalledTimes(1);
    expect(releaseErrors.mock.calls[0]?.[0].error).toBeInstanceOf(QuorumUnavailableError);
  });

  it("hands the release to waitUntil instead of awaiting it", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 50 };
    const handed: Promise<unknown>[] = [];
    const redlock = client(nodes, { requestTimeoutMs: 500 });
    await run(
      redlock.using("r", 1000, async () => "ok", { waitUntil: (p) => handed.push(p) }),
      1,
    );
    expect(handed).toHaveLength(1);
    expect(nodes.filter((n) => n.get("r") !== undefined).length).toBeGreaterThanOrEqual(2);
    await run(handed[0] as Promise<unknown>, 1);
    await run(redlock.settled(), 1);
    for (const n of nodes) expect(n.get("r")).toBeUndefined();
  });

  it("passes the caller's abort on to the routine's signal", async () => {
    const nodes = fakeNodes(3);
    const controller = new AbortController();
    const reason = await run(
      client(nodes).using(
        "r",
        1000,
        (signal) =>
          new Promise((resolve) => {
            signal.addEventListener("abort", () => resolve(signal.reason));
            setTimeout(() => controller.abort("stop"), 10);
          }),
        { signal: controller.signal },
      ),
      1,
    );
    expect(reason).toBe("stop");
  });
});

describe("inspect", () => {
  it("reports each node's value and PTTL, or its error", async () => {
    const nodes = fakeNodes(3);
    nodes[0]!.occupy("r", "abc", 5000);
    nodes[2]!.behaviour = { kind: "error" };
    const result = await run(client(nodes).inspect("r"), 1);
    // A token is a capability: shown by its last 4 characters unless asked for whole.
    expect(result.nodes[0]).toEqual({ node: "n0", value: "…abc", pttlMs: 5000 });
    const revealed = await run(client(nodes).inspect("r", { revealTokens: true }), 1);
    expect(revealed.nodes[0]).toMatchObject({ node: "n0", value: "abc" });
    const token = "0123456789abcdef0123456789abcdef01234567";
    nodes[1]!.occupy("r", token, 5000);
    const shown = await run(client(nodes).inspect("r"), 1);
    expect(JSON.stringify(shown)).not.toContain(token.slice(0, 8));
    expect(shown.nodes[1]).toMatchObject({ value: "…4567" });
    expect(result.nodes[1]).toEqual({ node: "n1", value: null, pttlMs: -2 });
    expect(revealed.nodes[1]).toEqual({ node: "n1", value: null, pttlMs: -2 });
    expect(result.nodes[2]).toMatchObject({ node: "n2", error: expect.any(Error) });
  });
});

describe("bad input (DESIGN §5)", () => {
  const nodes = fakeNodes(3);
  const redlock = () => client(nodes);

  it.each([
    ["zero", 0],
    ["negative", -5],
    ["fractional", 1.5],
    ["NaN", Number.NaN],
    ["a string", "1000"],
    ["above the 24 h cap", 86_400_001],
    ["too short to leave validity", 2],
  ])("TTL %s → InvalidArgumentError, nothing sent", async (_, ttl) => {
    await expect(redlock().acquire("r", ttl as number)).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(nodes.every((n) => n.log.length === 0)).toBe(true);
  });

  it.each([
    ["an empty name", ""],
    ["an empty list", []],
    ["an oversized name", "x".repeat(1025)],
    ["a non-string", 42],
    ["a duplicate", ["a", "a"]],
    ["too many resources", Array.from({ length: 65 }, (_, i) => `r${i}`)],
  ])("resources: %s → InvalidArgumentError", async (_, resources) => {
    await expect(redlock().acquire(resources as string, 1000)).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it("an empty node list → ConfigurationError", () => {
    expect(() => new Redlock({ nodes: [] })).toThrow(ConfigurationError);
  });

  it("duplicate nodes → ConfigurationError", () => {
    expect(
      () =>
        new Redlock({
          nodes: [
            { url: "https://a.test", token: "x" },
            { url: "https://a.test/", token: "y" },
          ],
        }),
    ).toThrow(ConfigurationError);
  });

  it.each([1, 2, 6, 2.5])("quorum %s on 5 nodes → ConfigurationError", (quorum) => {
    expect(() => new Redlock({ nodes: fakeNodes(5), quorum })).toThrow(ConfigurationError);
  });

  it("a raised quorum is accepted", () => {
    expect(() => new Redlock({ nodes: fakeNodes(5), quorum: 4 })).not.toThrow();
  });

  it("an invalid per-call option → InvalidArgumentError", async () => {
    await expect(redlock().acquire("r", 1000, { maxAttempts: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(redlock().acquire("r", 1000, { quorum: 1 })).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it.each([["garbage"], ["unauthorized"]] as const)("a node answering %s never counts as acquired", async (kind) => {
    const bad = fakeNodes(3);
    for (const n of bad.slice(0, 2)) n.behaviour = { kind } as never;
    const error = await run(client(bad, { maxAttempts: 1 }).acquire("r", 1000), 1).catch((e) => e);
    expect(error).toBeInstanceOf(kind === "garbage" ? QuorumUnavailableError : ConfigurationError);
  });
});

describe("using() and a routine that outlives its lock", () => {
  it("rejects with LockLostError when the routine ignored the signal past the lock's validity", async () => {
    const nodes = fakeNodes(3);
    const error = await run(
      client(nodes).using("r", 500, () => new Promise((resolve) => setTimeout(() => resolve("done"), 800)), {
        maxExtensions: 0,
      }),
      1,
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockLostError);
  });

  it("negative control: a routine that ends within the lock's validity resolves with its result", async () => {
    const nodes = fakeNodes(3);
    const result = await run(
      client(nodes).using("r", 500, () => new Promise((resolve) => setTimeout(() => resolve("done"), 100)), {
        maxExtensions: 0,
      }),
      1,
    );
    expect(result).toBe("done");
  });

  it("a routine that released the lock itself resolves with its result", async () => {
    const nodes = fakeNodes(3);
    const result = await run(
      client(nodes).using("r", 500, async (_signal, lock) => {
        await lock.release();
        return "done";
      }),
      1,
    );
    expect(result).toBe("done");
  });
});

describe("a nested acquisition of a resource the using() routine holds", () => {
  it("fails at once instead of waiting for itself (Node tracks the async context)", async () => {
    const nodes = fakeNodes(3);
    const redlock = client(nodes);
    const started = Date.now();
    const nested = await run(
      redlock.using("r", 5000, async () => {
        const inner = await redlock.acquire("r", 1000).catch((e: unknown) => e);
        const innerUsing = await redlock.using("r", 1000, async () => "ran").catch((e: unknown) => e);
        // Another client of the same nodes is the same cluster: the same wait for itself.
        const sibling = await client(nodes)
          .acquire(["q", "r"], 1000)
          .catch((e: unknown) => e);
        return { inner, innerUsing, sibling };
      }),
      1,
    );
    expect(nested.inner).toBeInstanceOf(InvalidArgumentError);
    expect(nested.innerUsing).toBeInstanceOf(InvalidArgumentError);
    expect(nested.sibling).toBeInstanceOf(InvalidArgumentError);
    expect((nested.inner as Error).message).toMatch(/would wait for itself/);
    expect(Date.now() - started).toBeLessThan(100);
  });

  it("negative control: other resources, and the same resource outside the routine, are acquired as usual", async () => {
    const nodes = fakeNodes(3);
    const redlock = client(nodes);
    const other = await run(
      redlock.using("r", 5000, async () => {
        const lock = await redlock.acquire("other", 1000);
        await lock.release();
        return lock.resources;
      }),
      1,
    );
    expect(other).toEqual(["other"]);
    const after = await run(redlock.acquire("r", 1000), 1);
    expect(after.resources).toEqual(["r"]);
    await run(after.release(), 1);
  });
});
