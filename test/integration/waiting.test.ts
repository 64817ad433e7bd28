/**
 * Waiting for a held lock, against real nodes. Requests are counted per node by an injected
 * `fetch`, independently of what the library reports.
 */
import { describe, expect, it } from "vitest";
import { clusterScript } from "../../src/core/scripts/cluster.js";
import { Redlock } from "../../src/index.js";
import { gateIndex } from "../../src/waiting/gate.js";
import { gateScript } from "../../src/waiting/scripts/gate.js";
import { expectClaimHolds } from "./support/claims.js";
import { raw, uniqueKey } from "./support/nodes.js";
import { useOwnCluster } from "./support/own-cluster.js";

const nodesOf = useOwnCluster();
const endpoints = () => nodesOf().nodes.map(({ url, token }) => ({ url, token }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Nodes whose requests are counted, per node, as they are sent; `gatePolls` counts the gate script.
 * The cluster check that a client's first acquisitions send alongside is not counted.
 */
function countedNodes() {
  const counts = [0, 0, 0, 0, 0];
  const gatePolls = [0, 0, 0, 0, 0];
  const nodes = endpoints().map((e, i) => ({
    ...e,
    fetch: ((input, init) => {
      const body = String(init?.body);
      const check = body.includes(clusterScript.sha1) || body.includes(JSON.stringify(clusterScript.source));
      if (!check) counts[i] = (counts[i] ?? 0) + 1;
      if (body.includes(gateScript.sha1) || body.includes(JSON.stringify(gateScript.source))) {
        gatePolls[i] = (gatePolls[i] ?? 0) + 1;
      }
      return fetch(input, init);
    }) as typeof fetch,
  }));
  return { nodes, counts, gatePolls };
}

describe("while the lock is held elsewhere", () => {
  it("a waiter sends one request per poll, to the gate only", async () => {
    const key = uniqueKey("one-per-poll");
    const gate = gateIndex([key], 5);
    const holder = new Redlock({ nodes: endpoints() });
    const lock = await holder.acquire(key, 10_000);
    const { nodes, counts } = countedNodes();
    let polls = 0;
    let attempts = 0;
    const waiter = new Redlock({
      nodes,
      onAttempt: (report) => {
        if (report.operation !== "acquire") return;
        attempts++;
        polls += report.polls ?? 0;
      },
    });
    const waiting = waiter.acquire(key, 10_000);
    await sleep(1500);
    const duringWait = [...counts];
    await lock.release();
    const acquired = await waiting;
    await expectClaimHolds(endpoints(), acquired);
    // Before the release: the first fan-out (one request per node), then polls of the gate alone.
    for (let i = 0; i < 5; i++) if (i !== gate) expect(duringWait[i], `node ${i}`).toBe(1);
    expect(duringWait[gate]).toBeGreaterThan(2);
    // Every request to the gate beyond the fan-outs was a poll, and each poll was one request.
    const fanOutsToGate = attempts;
    expect(counts[gate]).toBe(fanOutsToGate + polls);
    await acquired.release();
  });

  it("a paused gate node costs at most one request deadline, then plain fan-outs take over", async () => {
    const key = uniqueKey("paused-gate");
    const gate = gateIndex([key], 5);
    const holder = new Redlock({ nodes: endpoints() });
    const lock = await holder.acquire(key, 3000);
    nodesOf().pause(gate);
    try {
      const { nodes, gatePolls } = countedNodes();
      // What the waiter sends once the gate is down is under test, and it must still get the lock
      // at the end: its backoff's fan-outs before the release at 700 ms may, by their jitter, spend
      // the default request budget first (a loaded .ci/run gave up after 5 fan-outs, 31 requests).
      const waiter = new Redlock({ nodes, requestTimeoutMs: 300, requestBudget: Number.POSITIVE_INFINITY });
      const waiting = waiter.acquire(key, 3000);
      await sleep(700);
      await lock.release();
      const acquired = await waiting;
      // One poll timed out; after that the waiter never waited on the gate again.
      expect(gatePolls[gate]).toBe(1);
      expect(acquired.acquireReport.nodes[gate]?.outcome).not.toBe("acquired");
      await acquired.release();
    } finally {
      nodesOf().resume(gate);
    }
  });

  it("a gate that forgot the lock (restarted) keeps the waiters polling one node", async () => {
    const key = uniqueKey("forgetful-gate");
    const gate = gateIndex([key], 5);
    const holder = new Redlock({ nodes: endpoints() });
    const lock = await holder.acquire(key, 4000);
    await nodesOf().restart(gate);
    const { nodes, counts } = countedNodes();
    // What the waiter sends while the gate is out of step is under test, and it must still get
    // the lock at the end: the request budget would end a wait of several placeholder rounds first.
    const waiter = new Redlock({ nodes, requestBudget: Infinity });
    const waiting = waiter.acquire(key, 4000);
    await sleep(2000);
    const others = counts.filter((_, i) => i !== gate);
    // Without a placeholder every poll would take the empty gate and fan out to the others.
    // With it, the others see a fan-out each time the placeholder runs out: a handful in 2 s.
    for (const count of others) expect(count).toBeLessThanOrEqual(6);
    expect(counts[gate]).toBeGreaterThan(Math.max(...others));
    await lock.release();
    const acquired = await waiting;
    await expectClaimHolds(endpoints(), acquired);
    await acquired.release();
  });
});

describe("what the gate keeps on the nodes", () => {
  /** Every key on any node whose name contains `label`: the lock keys and the gate's records. */
  async function keysNamed(label: string): Promise<string[]> {
    const found = await Promise.all(endpoints().map((e) => raw(e, "KEYS", `*${label}*`)));
    return found.flat() as string[];
  }

  it("an uncontended lock leaves nothing behind, while a line keeps its record", async () => {
    // A lock per user or per request: every key ever released used to leave a record on its gate
    // node for ten minutes.
    const label = uniqueKey("leaves-nothing");
    const redlock = new Redlock({ nodes: endpoints() });
    for (let i = 0; i < 20; i++) {
      const lock = await redlock.acquire(`${label}:${i}`, 10_000);
      await lock.release();
    }
    expect(await keysNamed(label)).toEqual([]);

    // With a waiter in line, the gate keeps what waiters plan by: the release counts a turn.
    const hot = `${label}:hot`;
    const holder = await redlock.acquire(hot, 10_000);
    const waiting = new Redlock({ nodes: endpoints() }).acquire(hot, 10_000);
    await sleep(300);
    await holder.release();
    const next = await waiting;
    const stats = (await keysNamed(label)).filter((k) => k.endsWith(":stats"));
    expect(stats).toHaveLength(1);
    const node = endpoints()[gateIndex([hot], 5)] as { url: string; token: string };
    expect(await raw(node, "HGET", stats[0] as string, "turns")).toBe("1");
    await next.release();
  });
});
