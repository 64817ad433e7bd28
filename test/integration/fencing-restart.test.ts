/**
 * Amnesia on real nodes: a fresh deployment refuses fenced locks until it is initialised; a
 * redis-server restarted empty is quarantined for at least the TTL, then repaired from a quorum,
 * and only then counts again; the token keeps increasing throughout. Own 3-node cluster, since it
 * restarts nodes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FencingError } from "../../src/base/errors.js";
import { randomToken } from "../../src/core/token.js";
import { fencedAttempt } from "../../src/fencing/attempt.js";
import { initializeFencing } from "../../src/fencing/initialize.js";
import { fencingKeys } from "../../src/fencing/keys.js";
import { fenceReadScript } from "../../src/fencing/scripts/fence-read.js";
import { type RedisNode, restNode } from "../../src/transport/rest.js";
import { type NodeCluster, startNodes } from "../../tools/nodes/index.js";
import { releaseEverywhere, sleep } from "./support/fencing.js";
import { raw } from "./support/nodes.js";

const TTL_MS = 1500;
const QUARANTINE_MS = TTL_MS + Math.floor(TTL_MS * 0.01) + 2;
const keys = fencingKeys("");

describe("fencing across node restarts (real redis-server)", () => {
  let cluster: NodeCluster;
  let nodes: RedisNode[];
  const endpoint = (i: number) => ({ url: cluster.nodes[i]!.url, token: cluster.nodes[i]!.token });

  beforeAll(async () => {
    cluster = await startNodes({ count: 3 });
    nodes = cluster.nodes.map(({ url, token }) => restNode({ url, token }));
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  async function grant(): Promise<{ fence: number; result: Awaited<ReturnType<typeof fencedAttempt>> }> {
    const token = randomToken();
    const result = await fencedAttempt({
      nodes,
      keyPrefix: "",
      resources: ["r"],
      token,
      ttlMs: TTL_MS,
      quorum: 2,
      requestTimeoutMs: 1000,
      quarantineMs: QUARANTINE_MS,
      clock: { now: () => performance.now() },
    });
    await releaseEverywhere(nodes, ["r"], token);
    return { fence: Number(result.fence ?? Number.NaN), result };
  }

  /** Node i's own view of its health for resource r, read with the fence-read script. */
  async function status(i: number): Promise<string> {
    const reply = await raw(endpoint(i), "EVAL", fenceReadScript.source, 4, ...Object.values(keys), "r");
    return (reply as string[])[0] as string;
  }

  it("refuses until initialised, quarantines a restarted node, repairs it, and keeps the token increasing", async () => {
    // A brand-new deployment: no marker anywhere; the attempt fails and marks nothing.
    const fresh = await grant();
    expect(fresh.result.reason).toBe("uninitialized");
    await fresh.result.maintenance;
    expect(await Promise.all([0, 1, 2].map(status))).toEqual(["NO_MARKER", "NO_MARKER", "NO_MARKER"]);

    expect((await initializeFencing({ nodes })).initialized).toBe(3);
    const first = await grant();
    expect(first.fence).toBe(1);

    // Node 0 restarts empty. Initialisation now refuses: nodes 1 and 2 prove the deployment existed.
    await cluster.restart(0);
    expect(await status(0)).toBe("NO_MARKER");
    const refused = await initializeFencing({ nodes }).catch((e) => e);
    expect(refused).toBeInstanceOf(FencingError);
    expect(refused.code).toBe("FENCING_INIT_REFUSED");

    // The next fenced attempt still succeeds on nodes 1 and 2, and quarantines node 0.
    const second = await grant();
    expect(second.fence).toBeGreaterThan(first.fence);
    expect((await second.result.maintenance).quarantined).toEqual([nodes[0]!.id]);
    expect(await status(0)).toBe("QUARANTINED");
    const pttl = (await raw(endpoint(0), "PTTL", keys.quarantine)) as number;
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(QUARANTINE_MS);

    // Quarantined, node 0 grants nothing: with node 2 paused, no quorum is possible.
    cluster.pause(2);
    try {
      const blocked = await grant();
      expect(blocked.result.granted).toBe(false);
      expect(await raw(endpoint(0), "EXISTS", "r")).toBe(0);
    } finally {
      cluster.resume(2);
    }

    // After the quarantine it needs repair; the next attempt's maintenance repairs it from a quorum.
    for (let i = 0; i < 100 && (await status(0)) === "QUARANTINED"; i++) await sleep(50);
    expect(await status(0)).toBe("NEEDS_REPAIR");
    const third = await grant();
    expect(third.fence).toBeGreaterThan(second.fence);
    expect((await third.result.maintenance).repaired).toEqual([nodes[0]!.id]);
    expect(await status(0)).toBe("OK");
    expect(Number(await raw(endpoint(0), "HGET", keys.counters, "r"))).toBeGreaterThanOrEqual(third.fence);

    // Repaired, node 0 counts again: with node 2 paused the lock is granted on nodes 0 and 1.
    cluster.pause(2);
    try {
      const fourth = await grant();
      expect(fourth.fence).toBeGreaterThan(third.fence);
    } finally {
      cluster.resume(2);
    }
  }, 60_000);
});
