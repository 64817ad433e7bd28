/**
 * Safe across deployments, against real nodes: clients that a rollout runs side by side on shared
 * nodes never both hold a lock.
 * - Two node lists over overlapping nodes ([0,1,2] and [2,3,4]: quorums {0,1} and {3,4} share no
 *   node): whichever checks second is refused with `ConfigurationError`, on every call.
 * - The previous protocol (no cluster check, so it cannot be refused) beside the current one: both
 *   lock the same key names with `SET NX` and compare-and-DEL, so they exclude each other.
 * Each loop is audited from outside the library: an occupancy count of the holders that still
 * claim validity, and a counter that every holder reads and writes back on a node while it holds
 * the lock (an overlap loses updates). Each audit has a negative control it must catch: clients
 * whose quorums do not intersect, which it reports as overlaps.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clusterKey } from "../../src/core/fingerprint.js";
import { ConfigurationError, type Lock, Redlock, type RedlockOptions } from "../../src/index.js";
import { raw, uniqueKey } from "./support/nodes.js";
import { useOwnCluster } from "./support/own-cluster.js";
import { loadPreviousProtocol, type PreviousProtocol } from "./support/previous-protocol.js";

const nodesOf = useOwnCluster();
const endpoints = (...indices: number[]) =>
  indices.map((i) => ({ url: nodesOf().nodes[i]!.url, token: nodesOf().nodes[i]!.token }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Generous deadlines: the machine is shared; these tests are about who holds, not speed. */
const SLOW_OK: RedlockOptions = { requestTimeoutMs: 1000, acquireTimeoutMs: 30_000 };

interface Client {
  acquire(resource: string, ttlMs: number, options?: RedlockOptions): Promise<Lock>;
}

/** What a loop of acquisitions did, seen from outside the library. */
interface Audit {
  /** Grants made while another holder still claimed validity. */
  overlaps: number;
  grants: Map<string, number>;
  errors: Map<string, unknown[]>;
  /** The counter every holder incremented on node 0 under the lock. */
  counter: number;
}

/**
 * `workers` callers per client, each acquiring `key` `iterations` times, holding it for a
 * read-modify-write of a counter on node 0, and releasing it once.
 */
async function hammer(clients: Record<string, Client>, key: string, workers = 3, iterations = 8): Promise<Audit> {
  const counterKey = uniqueKey("counter");
  const node0 = endpoints(0)[0]!;
  const inside = new Set<Lock>();
  const audit: Audit = { overlaps: 0, grants: new Map(), errors: new Map(), counter: 0 };
  const loops = Object.entries(clients).flatMap(([name, client]) =>
    Array.from({ length: workers }, async () => {
      for (let i = 0; i < iterations; i++) {
        let lock: Lock;
        try {
          lock = await client.acquire(key, 10_000, SLOW_OK);
        } catch (error) {
          audit.errors.set(name, [...(audit.errors.get(name) ?? []), error]);
          continue;
        }
        if ([...inside].some((held) => held.remainingMs() > 0)) audit.overlaps++;
        inside.add(lock);
        audit.grants.set(name, (audit.grants.get(name) ?? 0) + 1);
        const n = Number((await raw(node0, "GET", counterKey)) ?? 0);
        await sleep(2);
        await raw(node0, "SET", counterKey, n + 1);
        inside.delete(lock);
        await lock.release();
      }
    }),
  );
  await Promise.all(loops);
  audit.counter = Number((await raw(node0, "GET", counterKey)) ?? 0);
  return audit;
}

describe("two node lists over shared nodes: [0,1,2] and [2,3,4]", () => {
  it("whichever checks second is refused on every call; they never both hold", async () => {
    const keyPrefix = `${uniqueKey("lists")}:`;
    const a = new Redlock({ nodes: endpoints(0, 1, 2), keyPrefix });
    const b = new Redlock({ nodes: endpoints(2, 3, 4), keyPrefix });
    const audit = await hammer({ a, b }, "hot");
    expect(audit.overlaps).toBe(0);
    const winner = (audit.grants.get("a") ?? 0) > 0 ? "a" : "b";
    const loser = winner === "a" ? "b" : "a";
    // Every call of the first one succeeds, every call of the second is refused.
    expect(audit.grants.get(winner)).toBe(24);
    expect(audit.grants.get(loser)).toBeUndefined();
    expect(audit.errors.get(winner)).toBeUndefined();
    const refusals = audit.errors.get(loser) ?? [];
    expect(refusals).toHaveLength(24);
    for (const error of refusals) expect(error).toBeInstanceOf(ConfigurationError);
    expect(audit.counter).toBe(24);
    // The refusal names the shared node and the difference in words: no fingerprint, no token.
    const message = (refusals[0] as Error).message;
    const shared = loser === "b" ? "node 1" : "node 3";
    expect(message).toContain(`${shared} (${nodesOf().nodes[2]!.url}) of this client's 3 nodes already belongs`);
    expect(message).toContain("another node list");
    const kept = (await raw(endpoints(2)[0]!, "GET", clusterKey(keyPrefix))) as string;
    expect(message).not.toContain(kept.slice(3));
    for (const node of nodesOf().nodes) expect(message).not.toContain(node.token);
  });

  it("negative control: the same two lists named as one cluster both lock, and the audit sees it", async () => {
    const keyPrefix = `${uniqueKey("named")}:`;
    const a = new Redlock({ nodes: endpoints(0, 1, 2), keyPrefix, clusterName: "one" });
    const b = new Redlock({ nodes: endpoints(2, 3, 4), keyPrefix, clusterName: "one" });
    const audit = await hammer({ a, b }, "hot");
    expect(audit.grants.get("a")).toBeGreaterThan(0);
    expect(audit.grants.get("b")).toBeGreaterThan(0);
    expect(audit.overlaps).toBeGreaterThan(0);
  });

  it("after the first list is drained, the second list's reset lets it in and refuses the first", async () => {
    const keyPrefix = `${uniqueKey("reset")}:`;
    const a = new Redlock({ nodes: endpoints(0, 1, 2), keyPrefix });
    await (await a.acquire("r", 5000, SLOW_OK)).release();
    const b = new Redlock({ nodes: endpoints(2, 3, 4), keyPrefix, maxAttempts: 1 });
    await expect(b.acquire("r", 5000, SLOW_OK)).rejects.toBeInstanceOf(ConfigurationError);
    expect((await b.resetClusterFingerprint()).reset).toBe(3);
    await (await b.acquire("r", 5000, SLOW_OK)).release();
    // A client of the first list that starts now (a fetch of its own: nothing shared with `a`).
    const late = new Redlock({
      nodes: endpoints(0, 1, 2).map((e) => ({
        ...e,
        fetch: (input: RequestInfo | URL, init?: RequestInit) => fetch(input, init),
      })),
      keyPrefix,
      maxAttempts: 1,
    });
    await expect(late.acquire("r", 5000, SLOW_OK)).rejects.toBeInstanceOf(ConfigurationError);
  });
});

describe("clients of one cluster", () => {
  it("are not refused: other URL spellings, display ids and order; another keyPrefix is another namespace", async () => {
    const keyPrefix = `${uniqueKey("same")}:`;
    const a = new Redlock({ nodes: endpoints(0, 1, 2, 3, 4), keyPrefix });
    const b = new Redlock({
      nodes: endpoints(4, 3, 2, 1, 0).map((e, i) => ({ ...e, url: `${e.url}/`, id: `node-${i}` })),
      keyPrefix,
    });
    const audit = await hammer({ a, b }, "hot", 2, 6);
    expect(audit.overlaps).toBe(0);
    expect(audit.grants.get("a")).toBe(12);
    expect(audit.grants.get("b")).toBe(12);
    // Another keyPrefix is another lock namespace with a fingerprint of its own: the same
    // resource is locked there independently (so a changed keyPrefix is a changed lock, see docs/deployments.md).
    const c = new Redlock({ nodes: endpoints(0, 1, 2), keyPrefix: `${keyPrefix}other:` });
    const held = await a.acquire("r", 5000, SLOW_OK);
    const alongside = await c.acquire("r", 5000, SLOW_OK);
    expect(await raw(endpoints(0)[0]!, "GET", clusterKey(`${keyPrefix}other:`))).toMatch(/^v2:/);
    await Promise.all([held.release(), alongside.release()]);
  });
});

describe("the previous protocol beside the current one", () => {
  let previous: PreviousProtocol;
  beforeAll(async () => {
    previous = await loadPreviousProtocol();
  }, 60_000);
  afterAll(() => previous?.dispose());

  it("locks the same keys with SET NX and releases with compare-and-DEL, as the current one does", async () => {
    const key = uniqueKey("semantics");
    const nodes = endpoints(0, 1, 2, 3, 4);
    const old = new previous.Redlock({ nodes, maxAttempts: 1 });
    const current = new Redlock({ nodes, maxAttempts: 1 });
    // It sends no cluster check, so no fingerprint can refuse it: another cluster's is ignored.
    const keyPrefix = `${uniqueKey("unchecked")}:`;
    for (const node of nodes) await raw(node, "SET", clusterKey(keyPrefix), "v2:0123456789abcdef");
    await (await new previous.Redlock({ nodes, keyPrefix }).acquire("r", 5000)).release();
    const oldLock = await old.acquire(key, 10_000);
    for (const node of nodes) expect(await raw(node, "GET", key)).toBe(oldLock.token);
    expect(await current.tryAcquire(key, 10_000)).toBeNull();
    expect((await current.release(key, "0".repeat(40))).released).toBe(0);
    // A release settles at a quorum; the slower nodes finish in the background.
    expect((await current.release(key, oldLock.token)).released).toBeGreaterThanOrEqual(3);
    await current.settled();
    for (const node of nodes) expect(await raw(node, "GET", key)).toBeNull();
    const currentLock = await current.acquire(key, 10_000);
    for (const node of nodes) expect(await raw(node, "GET", key)).toBe(currentLock.token);
    expect(await old.tryAcquire(key, 10_000)).toBeNull();
    expect((await old.release(key, oldLock.token)).released).toBe(0);
    await currentLock.release();
    for (const node of nodes) expect(await raw(node, "GET", key)).toBeNull();
  });

  it("never both hold one hot key", async () => {
    const old = new previous.Redlock({ nodes: endpoints(0, 1, 2, 3, 4) });
    const current = new Redlock({ nodes: endpoints(0, 1, 2, 3, 4) });
    const audit = await hammer({ old, current }, uniqueKey("mixed"));
    expect(audit.errors.size).toBe(0);
    expect(audit.grants.get("old")).toBe(24);
    expect(audit.grants.get("current")).toBe(24);
    expect(audit.overlaps).toBe(0);
    expect(audit.counter).toBe(48);
    // Which previous client ran: the history's when the clone has it.
    expect(["history", "patched"]).toContain(previous.source);
  });

  it("negative control: the previous client under another keyPrefix does not exclude the current one, and the audit sees it", async () => {
    const key = uniqueKey("prefixed");
    const old = new previous.Redlock({ nodes: endpoints(0, 1, 2, 3, 4), keyPrefix: "old:" });
    const current = new Redlock({ nodes: endpoints(0, 1, 2, 3, 4) });
    const audit = await hammer({ old, current }, key);
    expect(audit.overlaps).toBeGreaterThan(0);
  });
});
