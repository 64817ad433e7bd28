/**
 * The nodes' MONITOR streams at the end of a run: a stream that trails the commands must be read
 * to its end before the checkers replay it, or checker 2's log half takes the keys it has not
 * shown yet for keys the node never held.
 */
import { createServer, connect as netConnect, type Server, type Socket } from "node:net";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HistoryEvent } from "../../tools/chaos/history.js";
import { startMonitors } from "../../tools/chaos/monitor.js";
import { startNodes } from "../../tools/nodes/index.js";
import { isProcessAlive } from "../../tools/nodes/process-utils.js";

/** How late the relay hands the node's output to its client, ms. */
const LAG_MS = 1_000;

type Cluster = Awaited<ReturnType<typeof startNodes>>;
let cluster: Cluster;
let relay: { server: Server; port: number; sockets: Set<Socket> };

/** A relay to the node that holds everything the node sends for `LAG_MS`, in order. */
async function startLaggingRelay(targetPort: number): Promise<typeof relay> {
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = netConnect(targetPort, "127.0.0.1");
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => sockets.delete(s));
    }
    inbound.on("data", (chunk) => outbound.write(chunk));
    outbound.on("data", (chunk) => {
      setTimeout(() => inbound.writable && inbound.write(chunk), LAG_MS);
    });
    inbound.on("close", () => outbound.destroy());
    outbound.on("close", () => setTimeout(() => inbound.destroy(), LAG_MS));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("relay has no port");
  return { server, port: address.port, sockets };
}

/** A MONITOR of the node through the relay, its events into `history`. */
function monitorThroughRelay(history: HistoryEvent[]) {
  return startMonitors({ ports: [relay.port], keyPrefix: "lag:", emit: (event) => void history.push(event) });
}

beforeAll(async () => {
  cluster = await startNodes({ count: 1 });
  relay = await startLaggingRelay(cluster.nodes[0]?.redisPort as number);
});

afterAll(async () => {
  for (const s of relay.sockets) s.destroy();
  await new Promise<void>((resolve) => relay.server.close(() => resolve()));
  const pids = cluster.pids();
  await cluster.stop();
  expect(pids.filter(isProcessAlive)).toEqual([]);
});

describe("MONITOR streams at the end of a run", () => {
  it("drain() waits for a stream that trails the commands, where a fixed pause missed its last writes", async () => {
    const history: HistoryEvent[] = [];
    const monitors = await monitorThroughRelay(history);
    const direct = new Redis({ host: "127.0.0.1", port: cluster.nodes[0]?.redisPort as number });
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
    const monitors = await startMonitors({
      ports: [cluster.nodes[0]?.redisPort as number],
      keyPrefix: "lag:",
      emit: () => {},
    });
    cluster.pause(0);
    try {
      await expect(monitors.drain(500)).resolves.toBeUndefined();
    } finally {
      cluster.resume(0);
      await monitors.close();
    }
  });

  it("drain() fails when a running node's stream never shows its marker", async () => {
    const monitors = await monitorThroughRelay([]);
    try {
      // The stream is cut: the node still answers, but nothing more reaches the monitor.
      for (const s of relay.sockets) s.pause();
      await expect(monitors.drain(3 * LAG_MS)).rejects.toThrow(/did not catch up/);
    } finally {
      for (const s of relay.sockets) s.resume();
      await monitors.close();
    }
  });
});
