/**
 * The portable suite: one set of cases, written once, run unchanged in every runtime (Node,
 * workerd, the Vercel Edge sandbox, Deno, Bun) against real local nodes.
 *
 * Runtime-agnostic on purpose: no Node API, no test framework, only what the library itself may
 * use (fetch, timers, Web Crypto). The library arrives as a parameter (the module each runtime
 * imported), and so do the nodes and, optionally, the assertions, so each runtime's own harness
 * decides how to import, how to run and how to report.
 */
import type * as EdgeRedlock from "./edge-redlock.js";

/** The library's module, as each runtime imported it. */
export type EdgeRedlockModule = typeof EdgeRedlock;

/** A REST endpoint: a real redis-server behind an Upstash-compatible bridge. */
export interface SuiteNode {
  url: string;
  token: string;
}

/** What the suite runs against. */
export interface SuiteInput {
  /** At least 5 live nodes. */
  nodes: SuiteNode[];
  /** A URL where nothing listens (a closed loopback port): a dead node. */
  deadUrl: string;
  /** Names the runtime; part of every key, so runs in several runtimes at once never collide. */
  runtime: string;
  /** Unique per run (default: a random UUID), also part of every key. */
  runId?: string;
}

/** The assertions the suite needs. Each throws on failure. */
export interface SuiteAssert {
  ok(value: unknown, message: string): void;
  equal(actual: unknown, expected: unknown, message: string): void;
}

/** Plain assertions with readable messages, for runtimes that bring none. */
export const basicAssert: SuiteAssert = {
  ok(value, message) {
    if (!value) throw new Error(`assertion failed: ${message}`);
  },
  equal(actual, expected, message) {
    if (!Object.is(actual, expected)) {
      throw new Error(`assertion failed: ${message}: expected ${show(expected)}, got ${show(actual)}`);
    }
  },
};

/** The cases, in the order they run. */
export const CASE_NAMES = [
  "acquire",
  "tryAcquire returns null while held",
  "contention between two clients",
  "extend keeps the token and pushes the PTTL out",
  "release deletes the key on every node",
  "using() extends automatically and releases",
  "inspect reports value and PTTL per node",
  "one node down: acquire succeeds, the dead node reports an error",
] as const;

export type CaseName = (typeof CASE_NAMES)[number];

/** The extra case of the runtimes that import the package by name themselves (Deno, Bun). */
export const RESOLUTION_CASE = "the package name resolves to the built dist/index.js";

/** Builds the cases. Nothing is sent until a case runs; the cases are independent of each other. */
export function portableSuite(
  lib: EdgeRedlockModule,
  input: SuiteInput,
  assert: SuiteAssert = basicAssert,
): Record<CaseName, () => Promise<void>> {
  const { Redlock } = lib;
  if (input.nodes.length < 5) throw new Error(`the portable suite needs 5 nodes, got ${input.nodes.length}`);
  const nodes = input.nodes.slice(0, 5);
  const keyPrefix = `edge-redlock:runtimes:${input.runtime}:${input.runId ?? crypto.randomUUID()}:`;
  // Generous per-request deadlines: the bridges share a busy test machine with every runtime.
  const client = (extra: Partial<EdgeRedlock.RedlockConfig> = {}) =>
    new Redlock({ nodes, keyPrefix, requestTimeoutMs: 250, retryBaseDelayMs: 20, retryMaxDelayMs: 100, ...extra });
  const quorum = 3;

  /** Every node's view of `resource`; throws if a live node failed to answer. */
  async function valuesOn(redlock: EdgeRedlock.Redlock, resource: string) {
    const result = await redlock.inspect(resource, { revealTokens: true });
    assert.equal(result.key, keyPrefix + resource, "inspect reports the prefixed key");
    assert.equal(result.nodes.length, redlock.nodes.length, "inspect answers for every node");
    return result.nodes.map((n) => {
      if ("error" in n) throw new Error(`inspect: node ${n.node} failed: ${n.error.message}`);
      return n;
    });
  }

  return {
    async acquire() {
      const redlock = client();
      const lock = await redlock.acquire("acquire", 5000);
      assert.ok(/^[0-9a-f]{40}$/.test(lock.token), `the token is 160 bits of hex (${lock.token})`);
      assert.equal(lock.resources.join(), "acquire", "lock.resources");
      assert.ok(lock.acquireReport.ok, "the winning attempt is ok");
      assert.ok(lock.acquireReport.votes >= quorum, `a quorum voted yes (${lock.acquireReport.votes})`);
      const remaining = lock.remainingMs();
      assert.ok(remaining > 4000 && remaining <= 5000, `remainingMs() is close to the TTL (${remaining})`);
      assert.equal(lock.signal.aborted, false, "the signal is not aborted while held");
      const holders = (await valuesOn(redlock, "acquire")).filter((n) => n.value === lock.token).length;
      assert.ok(holders >= quorum, `the token is set on a quorum (${holders})`);
      await lock.release();
      await redlock.settled();
    },

    async "tryAcquire returns null while held"() {
      const redlock = client();
      const held = await redlock.acquire("try", 5000);
      assert.equal(await redlock.tryAcquire("try", 5000), null, "tryAcquire while held");
      await held.release();
      await redlock.settled();
      const lock = await redlock.tryAcquire("try", 5000);
      assert.ok(lock !== null, "tryAcquire after release gets the lock");
      await lock?.release();
      await redlock.settled();
    },

    async "contention between two clients"() {
      const first = client();
      const second = client();
      const lock = await first.acquire("contended", 5000);
      assert.equal(await second.tryAcquire("contended", 5000), null, "the second client's tryAcquire while held");
      const refused = await second.acquire("contended", 5000, { maxAttempts: 2 }).then(
        () => "acquired",
        (error: unknown) => (lib.isRedlockError(error) ? error.code : String(error)),
      );
      assert.equal(refused, "LOCK_HELD", "the second client's acquire while held");
      await lock.release();
      await first.settled();
      const next = await second.acquire("contended", 5000);
      assert.ok(next.token !== lock.token, "the second client holds its own token");
      assert.equal(await first.tryAcquire("contended", 5000), null, "now the first client is refused");
      await next.release();
      await Promise.all([first.settled(), second.settled()]);
    },

    async "extend keeps the token and pushes the PTTL out"() {
      const redlock = client();
      const lock = await redlock.acquire("extend", 3000);
      await sleep(200);
      const before = await valuesOn(redlock, "extend");
      const pttlBefore = Math.max(...before.map((n) => n.pttlMs));
      assert.ok(pttlBefore > 0 && pttlBefore <= 2850, `PTTL ran down before the extension (${pttlBefore})`);
      const report = await lock.extend(10_000);
      assert.ok(report.ok && report.votes >= quorum, `the extension reached a quorum (${report.votes})`);
      assert.equal(lock.extensions, 1, "lock.extensions");
      assert.ok(lock.remainingMs() > 9000, `remainingMs() after the extension (${lock.remainingMs()})`);
      const after = await valuesOn(redlock, "extend");
      after.forEach((n, i) => {
        assert.ok(n.value === null || n.value === lock.token, `node ${n.node}: no other token (${n.value})`);
        // The extension settles once a quorum agreed: a node still pending then may not be extended yet.
        if (report.nodes[i]?.outcome !== "extended") return;
        assert.equal(n.value, lock.token, `node ${n.node} keeps the same token`);
        assert.ok(n.pttlMs > 9000 && n.pttlMs <= 10_000, `node ${n.node}: PTTL pushed out (${n.pttlMs})`);
      });
      await lock.release();
      await redlock.settled();
    },

    async "release deletes the key on every node"() {
      const redlock = client();
      const lock = await redlock.acquire("release", 5000);
      const result = await lock.release();
      assert.ok(result.released >= quorum, `released on a quorum (${result.released})`);
      assert.equal(lock.released, true, "lock.released");
      assert.equal(lock.signal.aborted, true, "the signal aborts on release");
      await redlock.settled();
      for (const n of await valuesOn(redlock, "release")) assert.equal(n.value, null, `node ${n.node} after release`);
      // A second release sends nothing and answers with the first one's result.
      const again = await lock.release();
      assert.equal(again, result, "a second release returns the first one's result");
      const next = await redlock.tryAcquire("release", 5000);
      assert.ok(next !== null, "the resource is free again");
      await next?.release();
      await redlock.settled();
    },

    async "using() extends automatically and releases"() {
      const redlock = client({ requestTimeoutMs: 150 });
      let seen: { extensions: number; aborted: boolean; token: string } | undefined;
      const result = await redlock.using("using", 600, async (signal, lock) => {
        await sleep(1500); // more than twice the TTL: only the auto-extension keeps the lock
        seen = { extensions: lock.extensions, aborted: signal.aborted, token: lock.token };
        assert.ok(lock.remainingMs() > 0, `still valid after 1500 ms (${lock.remainingMs()})`);
        return "done";
      });
      assert.equal(result, "done", "using() returns the routine's result");
      assert.ok(seen !== undefined, "the routine ran");
      assert.ok((seen?.extensions ?? 0) >= 1, `lock.extensions during the routine (${seen?.extensions})`);
      assert.equal(seen?.aborted, false, "the routine's signal did not abort");
      await redlock.settled();
      for (const n of await valuesOn(redlock, "using")) assert.equal(n.value, null, `node ${n.node} after using()`);
    },

    async "inspect reports value and PTTL per node"() {
      const redlock = client();
      const free = await valuesOn(redlock, "inspect");
      for (const n of free) {
        assert.equal(n.value, null, `node ${n.node}: no value before acquire`);
        assert.ok(n.pttlMs < 0, `node ${n.node}: negative PTTL for a missing key (${n.pttlMs})`);
      }
      const lock = await redlock.acquire("inspect", 4000);
      await redlock.settled();
      const held = await valuesOn(redlock, "inspect");
      assert.equal(held.map((n) => n.node).join(), redlock.nodes.map((n) => n.id).join(), "nodes in config order");
      const holders = held.filter((n) => n.value === lock.token);
      assert.ok(holders.length >= quorum, `the token on a quorum (${holders.length})`);
      for (const n of holders) assert.ok(n.pttlMs > 3000 && n.pttlMs <= 4000, `node ${n.node}: PTTL (${n.pttlMs})`);
      await lock.release();
      await redlock.settled();
    },

    async "one node down: acquire succeeds, the dead node reports an error"() {
      const errors: { operation: string; node: string; outcome: string }[] = [];
      const redlock = client({
        nodes: [...nodes.slice(0, 4), { url: input.deadUrl, token: "nobody-listens" }],
        // Another node list over the same nodes: a lock namespace of its own (the cluster
        // fingerprint refuses two node lists that share nodes in one namespace).
        keyPrefix: `${keyPrefix}degraded:`,
        onNodeError: ({ operation, outcome }) =>
          errors.push({ operation, node: outcome.node, outcome: outcome.outcome }),
      });
      const dead = redlock.nodes[4]!.id;
      const lock = await redlock.acquire("degraded", 5000);
      const report = lock.acquireReport;
      assert.ok(report.ok && report.votes >= quorum, `acquired on the 4 live nodes (${report.votes} votes)`);
      const deadOutcome = report.nodes[4]!.outcome;
      // The vote may be decided before the refused connection is reported: then it is still pending.
      assert.ok(deadOutcome === "error" || deadOutcome === "pending", `dead node in the report: ${deadOutcome}`);
      for (const n of report.nodes.slice(0, 4)) {
        assert.ok(n.outcome === "acquired" || n.outcome === "pending", `live node ${n.node}: ${n.outcome}`);
      }
      // The hook hears every node error, also one that arrives after the vote.
      for (let i = 0; i < 100 && !errors.some((e) => e.operation === "acquire"); i++) await sleep(20);
      const heard = errors.find((e) => e.operation === "acquire");
      assert.equal(heard?.node, dead, "onNodeError names the dead node");
      assert.equal(heard?.outcome, "error", "the dead node's outcome is an error (not a timeout)");
      const inspected = await redlock.inspect("degraded", { revealTokens: true });
      const deadView = inspected.nodes[4]!;
      assert.ok("error" in deadView, "inspect reports the dead node's error");
      inspected.nodes.slice(0, 4).forEach((n, i) => {
        assert.ok("value" in n, `live node ${n.node} answers inspect`);
        const value = "value" in n ? n.value : undefined;
        // A live node still pending when the vote was decided may not have the key yet.
        if (report.nodes[i]?.outcome === "acquired")
          assert.equal(value, lock.token, `live node ${n.node} holds the token`);
        else assert.ok(value === lock.token || value === null, `live node ${n.node}: ${value}`);
      });
      const released = await lock.release();
      assert.ok(released.released >= quorum, `released on the live nodes (${released.released})`);
      await redlock.settled();
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function show(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}
