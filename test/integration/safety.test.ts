/**
 * Safety regressions against real nodes, each checked against what the nodes themselves hold:
 * - a shortened extension must not claim more than the keys' new TTL;
 * - a failed attempt must leave none of its keys behind, also when the cleanup needs EVALSHA and
 *   the EVAL fallback on a slow node, and when the cleanup overtakes a delayed SET;
 * - under random extensions and delays, every claimed deadline stays within the keys' expiry on a
 *   quorum (the invariant of test/integration/support/claims.ts).
 */
import { describe, expect, it } from "vitest";
import { Redlock } from "../../src/index.js";
import { auditClaim, expectClaimHolds } from "./support/claims.js";
import { raw, uniqueKey } from "./support/nodes.js";
import { useOwnCluster } from "./support/own-cluster.js";

const nodesOf = useOwnCluster();
const endpoints = () => nodesOf().nodes.map(({ url, token }) => ({ url, token }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a shortened extension", () => {
  it("claims the new, shorter deadline: no other client can acquire while the lock still claims validity", async () => {
    const key = uniqueKey("shortened");
    // Generous request deadlines: this checks claims, not speed, on a busy machine.
    const a = new Redlock({ nodes: endpoints(), requestTimeoutMs: 300 });
    const b = new Redlock({ nodes: endpoints(), maxAttempts: 1, requestTimeoutMs: 2000 });
    const lock = await a.acquire(key, 4000);
    await lock.extend(700);
    const audit = await auditClaim(endpoints(), lock);
    expect(audit.violation).toBeUndefined();
    expect(lock.remainingMs()).toBeLessThanOrEqual(700);
    await sleep(900);
    // The keys have expired everywhere: the lock must say so too.
    const other = await b.acquire(key, 4000);
    expect(lock.remainingMs()).toBeLessThanOrEqual(0);
    await other.release();
  });
});

describe("a failed attempt leaves no key behind", () => {
  async function keysLeft(key: string): Promise<(string | null)[]> {
    return Promise.all(endpoints().map((e) => raw(e, "GET", key) as Promise<string | null>));
  }

  it("when the cleanup meets a cold script cache on slow nodes (EVALSHA, NOSCRIPT, then EVAL)", async () => {
    const key = uniqueKey("cold");
    // Restarted nodes are empty, with an empty script cache.
    await Promise.all([0, 1, 2].map((i) => nodesOf().restart(i)));
    for (const i of [0, 1, 2]) nodesOf().setDelay(i, 300, "response");
    const redlock = new Redlock({ nodes: endpoints(), requestTimeoutMs: 100, maxAttempts: 1 });
    await expect(redlock.acquire(key, 3000)).rejects.toMatchObject({ code: "QUORUM_UNAVAILABLE" });
    await redlock.settled();
    for (let i = 0; i < 5; i++) nodesOf().setDelay(i, 0);
    expect(await keysLeft(key)).toEqual([null, null, null, null, null]);
    const other = new Redlock({ nodes: endpoints(), maxAttempts: 1 });
    const lock = await other.tryAcquire(key, 3000);
    expect(lock).not.toBeNull();
    await lock?.release();
  });

  it("when the cleanup overtakes a delayed SET that lands afterwards", async () => {
    const key = uniqueKey("reordered");
    // Nodes 0-2: the SET travels for 400 ms. The client gives up at its 100 ms deadline, but the
    // request is already on its way and the server applies it later; every other request (the
    // cleanup's releases) travels at once, so the cleanup's DEL overtakes the SET.
    const landed: Promise<unknown>[] = [];
    const nodes = endpoints().map((e, i) => (i < 3 ? { ...e, fetch: setLandsLate(400, landed) } : e));
    const redlock = new Redlock({ nodes, requestTimeoutMs: 100, maxAttempts: 1 });
    await expect(redlock.acquire(key, 5000)).rejects.toMatchObject({ code: "QUORUM_UNAVAILABLE" });
    await redlock.settled();
    // Judge only once every late SET has been applied by its server.
    await Promise.allSettled(landed);
    expect(landed).toHaveLength(3);
    expect(await keysLeft(key)).toEqual([null, null, null, null, null]);
  });
});

/**
 * A fetch whose `SET` requests reach the server `ms` late, whatever the client's signal says.
 * `landed` collects one promise per such request, settled once the server has answered it.
 */
function setLandsLate(ms: number, landed: Promise<unknown>[]): typeof fetch {
  return (input, init) =>
    new Promise<Response>((resolve, reject) => {
      const isSet = typeof init?.body === "string" && init.body.startsWith('["SET"');
      if (!isSet) return void fetch(input, init).then(resolve, reject);
      landed.push(
        new Promise((r) => setTimeout(r, ms)).then(() =>
          fetch(input, { ...init, signal: null }).then((response) => {
            resolve(response);
            return response.text();
          }, reject),
        ),
      );
      init?.signal?.addEventListener("abort", () => reject(init.signal?.reason), { once: true });
    });
}

describe("claims under random extensions and delays", () => {
  it("every grant and every extension claims no more than the keys hold on a quorum", async () => {
    const key = uniqueKey("claims");
    let seed = 12345;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const redlock = new Redlock({ nodes: endpoints(), requestTimeoutMs: 500 });
    let audits = 0;
    for (let round = 0; round < 6; round++) {
      // A different minority of slow nodes each round, in either phase.
      for (let i = 0; i < 5; i++)
        nodesOf().setDelay(i, i < 2 ? Math.floor(random() * 60) : 0, random() < 0.5 ? "request" : "response");
      const lock = await redlock.acquire(key, 400 + Math.floor(random() * 2600));
      await expectClaimHolds(endpoints(), lock);
      audits++;
      for (let e = 0; e < 4; e++) {
        // Shorter and longer than what is left.
        await lock.extend(400 + Math.floor(random() * 2600));
        await expectClaimHolds(endpoints(), lock);
        audits++;
      }
      await lock.release();
    }
    expect(audits).toBe(30);
  });
});
