/**
 * The nodes' MONITOR streams at the end of a run: a stream that trails the commands must be read
 * to its end before the checkers replay it, or checker 2's log half takes the keys it has not
 * shown yet for keys the node never held.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTcpProxy, type TcpProxy } from "../../tools/bench/tcp-proxy.js";
import { monitorStreams, NodeReplay } from "../../tools/chaos/checkers/replay.js";
import { harnessNow } from "../../tools/chaos/clock.js";
import { type HistoryEvent, tokenId } from "../../tools/chaos/history.js";
import { startMonitors } from "../../tools/chaos/monitor.js";
import { applyFault, type NemesisContext } from "../../tools/chaos/nemesis.js";
import { startNodes } from "../../tools/nodes/index.js";
import { isProcessAlive } from "../../tools/nodes/process-utils.js";

/** How late the proxy hands the node's output to its client, ms. */
const LAG_MS = 1_000;

type Cluster = Awaited<ReturnType<typeof startNodes>>;
let cluster: Cluster;
/** The bench's delaying TCP proxy in front of the node: every answer, MONITOR lines included, `LAG_MS` late. */
let lagging: TcpProxy;
const redisPort = () => cluster.nodes[0]?.redisPort as number;

/** A MONITOR of the node, its events into `history`. */
function monitor(port: number, history: HistoryEvent[] = []) {
  return startMonitors({ ports: [port], keyPrefix: "lag:", emit: (event) => void history.push(event) });
}

beforeAll(async () => {
  cluster = await startNodes({ count: 1 });
  lagging = await startTcpProxy(redisPort());
  lagging.setDelay({ fixedMs: LAG_MS, jitterMs: 0 });
});

afterAll(async () => {
  await lagging.close();
  const pids = cluster.pids();
  await cluster.stop();
  expect(pids.filter(isProcessAlive)).toEqual([]);
});

describe("MONITOR streams at the end of a run", () => {
  it("drain() waits for a stream that trails the commands, where a fixed pause missed its last writes", async () => {
    const history: HistoryEvent[] = [];
    const monitors = await monitor(lagging.port, history);
    const direct = new Redis({ host: "127.0.0.1", port: redisPort() });
    try {
      await direct.set("lag:k", "token", "PX", 10_000);
      const sets = () => history.filter((e) => e.f === "monitor" && e.cmd === "SET" && e.key === "lag:k");
      // The pause the harness used to take: the node ran the SET, its stream has not shown it yet.
      await new Promise((r) => setTimeout(r, 100));
      expect(sets()).toHaveLength(0);
      await monitors.drain(10_000);
      expect(sets()).toHaveLength(1);
    } finally {
      direct.disconnect();
      await monitors.close();
    }
  });

  it("drain() skips a node that does not answer (paused) instead of waiting on it", async () => {
    const monitors = await monitor(redisPort());
    cluster.pause(0);
    try {
      await expect(monitors.drain(500)).resolves.toBeUndefined();
    } finally {
      cluster.resume(0);
      await monitors.close();
    }
  });

  it("drain() fails when a running node's stream never shows its marker", async () => {
    const monitors = await monitor(redisPort());
    const admin = new Redis({ host: "127.0.0.1", port: redisPort() });
    try {
      // The stream is cut (its connection dropped): the node still answers, nothing reaches the monitor.
      const list = String(await admin.client("LIST"));
      const id = /id=(\d+) [^\n]* flags=O /.exec(list)?.[1];
      expect(id).toBeDefined();
      expect(await admin.client("KILL", "ID", id as string)).toBe(1);
      await expect(monitors.drain(1_000)).rejects.toThrow(/did not catch up/);
    } finally {
      admin.disconnect();
      await monitors.close();
    }
  });
});

describe("MONITOR streams across a node restart", () => {
  it("a restart's reset covers the keys clients set before the MONITOR was open again", async () => {
    const history: HistoryEvent[] = [];
    const monitors = await monitor(redisPort(), history);
    const token = "token-set-in-the-gap";
    let setAt = 0;
    // A client's SET lands on the restarted node before the nemesis re-opens its MONITOR.
    const cluster0 = {
      restart: async (i: number) => {
        await cluster.restart(i);
        const direct = new Redis({ host: "127.0.0.1", port: redisPort() });
        try {
          await direct.set("lag:gap", token, "PX", 10_000);
          setAt = harnessNow();
        } finally {
          direct.disconnect();
        }
      },
    };
    const ctx = { cluster: cluster0, monitors, emit: (e: HistoryEvent) => void history.push(e) };
    try {
      await applyFault(ctx as unknown as NemesisContext, {
        atMs: 0,
        durationMs: 0,
        fault: { id: 1, kind: "restart-now", nodes: [0] },
      });
      // The node held the key from setAt on; the replay, cut there, must not rule it out.
      const replay = new NodeReplay(10_000);
      for (const e of monitorStreams(history).get(0) ?? []) if (e.t <= setAt) replay.apply(e);
      expect(replay.mayHold("lag:gap", tokenId(token), setAt)).toBe(true);
    } finally {
      await monitors.close();
    }
  });
});
