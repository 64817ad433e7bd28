/**
 * Two clusters in one process (issue 27, M): clients share in-isolate state (offers of waiters,
 * who holds what) only when their nodes are the same servers, reached the same way. Two clusters
 * whose node configs carry the same display `id`s ("node-1"…, as the demo worker sets them), or
 * that sit behind one URL and differ by REST token, are two clusters: a release on one never hands
 * anything to a waiter of the other.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Lock, Redlock, type RedlockConfig } from "../../src/index.js";
import { type NodeCluster, startNodes } from "../../tools/nodes/index.js";
import type { Endpoint } from "./support/claims.js";
import type { Stub } from "./support/http-stub.js";
import { expectHeldAlone, foreignClient, sleep } from "./support/isolates.js";
import { raw, uniqueKey } from "./support/nodes.js";
import { startProxy } from "./support/proxy.js";

let clusters: NodeCluster[] = [];
const routers: Stub[] = [];

beforeAll(async () => {
  clusters = await Promise.all([startNodes({ count: 5 }), startNodes({ count: 5 })]);
  // One URL per node position, in front of both clusters: the REST token picks the cluster.
  for (let i = 0; i < 5; i++) {
    const targets = clusters.map((c) => c.nodes[i] as { url: string; token: string });
    routers.push(
      await startProxy(({ authorization }) => {
        const target = targets.find((t) => authorization === `Bearer ${t.token}`);
        return target
          ? { forward: target.url }
          : { answer: { status: 401, body: '{"error":"WRONGPASS invalid or missing auth token"}' } };
      }),
    );
  }
}, 60_000);

afterAll(async () => {
  await Promise.all(routers.map((r) => r.close()));
  await Promise.all(clusters.map((c) => c.stop()));
});

/**
 * Each cluster by name: its clients reach it directly and through the routers, by URLs that differ,
 * and the nodes' cluster fingerprint would otherwise refuse the second way in.
 */
const named = (cluster: number) => ({ clusterName: `one-token-clusters-${cluster}` });

const endpointsOf = (cluster: number): Endpoint[] =>
  (clusters[cluster] as NodeCluster).nodes.map(({ url, token }) => ({ url, token }));

/**
 * Client 1 holds `key` on cluster 1; on cluster 2 a client of another isolate holds it, and
 * client 2 (one isolate with client 1, as far as its configuration can tell) waits for it. Client
 * 1 releases. Client 2 must not get a lock, the holder on cluster 2 keeps its lock, and cluster 1
 * keeps nothing of the released lock.
 */
async function releaseBesideOtherCluster(label: string, config1: RedlockConfig, config2: RedlockConfig) {
  const key = uniqueKey(label);
  const one = new Redlock(config1);
  const two = new Redlock(config2);
  const holderOne = await one.acquire(key, 10_000);
  const holderTwo = await foreignClient(endpointsOf(1), named(1)).acquire(key, 10_000);
  const waiting = two.acquire(key, 10_000, { acquireTimeoutMs: 3000 });
  waiting.catch(() => undefined);
  await sleep(600);
  await holderOne.release();
  const outcome = await waiting.then(
    (lock) => lock,
    (error: unknown) => error,
  );
  await sleep(200);
  const leftOnOne = await Promise.all(endpointsOf(0).map((e) => raw(e, "GET", key)));
  if (outcome instanceof Lock) await outcome.release();
  expect(outcome, "client 2 got a lock while another client holds the key on cluster 2").not.toBeInstanceOf(Lock);
  await expectHeldAlone(endpointsOf(1), holderTwo, named(1));
  expect(leftOnOne, "what cluster 1's nodes keep of the released lock").toEqual([null, null, null, null, null]);
  await holderTwo.release();
}

describe("M: clients of two clusters in one process", () => {
  it("equal node ids: a release on cluster 1 hands nothing to a waiter of cluster 2", async () => {
    const withIds = (cluster: number) => endpointsOf(cluster).map((e, i) => ({ ...e, id: `node-${i + 1}` }));
    await releaseBesideOtherCluster(
      "m-equal-ids",
      { nodes: withIds(0), ...named(0) },
      { nodes: withIds(1), ...named(1) },
    );
  });

  it("one URL per node, a different REST token per cluster: a release on cluster 1 hands nothing to cluster 2", async () => {
    const viaRouter = (cluster: number) =>
      endpointsOf(cluster).map((e, i) => ({ ...e, url: (routers[i] as Stub).url }));
    await releaseBesideOtherCluster(
      "m-same-url",
      { nodes: viaRouter(0), ...named(0) },
      { nodes: viaRouter(1), ...named(1) },
    );
  });

  it("control: the same servers with equal ids are one isolate, and its release hands the lock over", async () => {
    // The same property as above, where sharing is right: client 2 waits on cluster 1 itself.
    const key = uniqueKey("m-same-cluster");
    const withIds = endpointsOf(0).map((e, i) => ({ ...e, id: `node-${i + 1}` }));
    const one = new Redlock({ nodes: withIds, ...named(0) });
    const two = new Redlock({ nodes: withIds, ...named(0) });
    const holder = await one.acquire(key, 10_000);
    const waiting = two.acquire(key, 10_000, { acquireTimeoutMs: 5000 });
    await sleep(600);
    await holder.release();
    const next = await waiting;
    await expectHeldAlone(endpointsOf(0), next, named(0));
    await next.release();
  });
});
