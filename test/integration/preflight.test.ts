/**
 * `checkNodes(redlock)` against real redis-servers behind the REST bridge (three nodes of its own,
 * so their settings can be changed): what it finds on healthy nodes, on one set to
 * `maxmemory-policy allkeys-lru` through its redis port, on one whose bridge serves `CONFIG GET`
 * (with AOF turned on), and the negative controls it must catch: a wrong token, a wrong URL path,
 * a closed port, and a node whose `TIME` runs 1.1× as fast. The bridge refuses `CONFIG` (as Upstash
 * does) and forwards `INFO`, so the default path reads the settings from `INFO`.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkNodes, type NodeCheck, type RedisNode, Redlock, restNode } from "../../src/index.js";
import { type NodeCluster, startNodes } from "../../tools/nodes/index.js";
import { type Bridge, startBridge } from "../../tools/rest-bridge/bridge.js";

/** Long enough for a conclusive clock check on loopback even on a busy machine. */
const SPACING_MS = 1000;

let cluster: NodeCluster;
/** A second bridge in front of node 2's redis-server, serving admin commands (CONFIG GET). */
let adminBridge: Bridge;
const adminToken = randomBytes(32).toString("hex");

beforeAll(async () => {
  cluster = await startNodes({ count: 3 });
  adminBridge = await startBridge({
    redisPort: cluster.nodes[2]?.redisPort as number,
    token: adminToken,
    allowAdminCommands: true,
  });
  await adminBridge.ready();
}, 60_000);

afterAll(async () => {
  await adminBridge?.close();
  await cluster?.stop();
});

const endpoint = (i: number) => ({ url: cluster.nodes[i]?.url as string, token: cluster.nodes[i]?.token as string });
const codes = (check: NodeCheck | undefined) => check?.findings.map((f) => f.code);
const finding = (check: NodeCheck | undefined, code: string) => check?.findings.find((f) => f.code === code);

/** Run one command on node i's redis-server directly (not through its bridge). */
async function direct(i: number, ...args: string[]): Promise<unknown> {
  const redis = new Redis({ host: "127.0.0.1", port: cluster.nodes[i]?.redisPort as number, lazyConnect: true });
  try {
    await redis.connect();
    return await redis.call(args[0] as string, ...args.slice(1));
  } finally {
    redis.disconnect();
  }
}

/** A node whose `TIME` answers run `rate` times as fast as the server's clock. */
function fastClock(node: RedisNode, rate: number): RedisNode {
  let origin: number | undefined;
  return {
    id: node.id,
    async command(args, signal) {
      const reply = await node.command(args, signal);
      if (String(args[0]).toUpperCase() !== "TIME" || !Array.isArray(reply)) return reply;
      const micros = Number(reply[0]) * 1e6 + Number(reply[1]);
      origin ??= micros;
      const scaled = Math.round(origin + (micros - origin) * rate);
      return [String(Math.floor(scaled / 1e6)), String(scaled % 1e6)];
    },
  };
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("checkNodes on real nodes", () => {
  it("finds healthy nodes healthy: reachable, writable, scripts, clock in rate, and noeviction / no AOF read from INFO", async () => {
    const before = cluster.commandCounts();
    const report = await checkNodes(new Redlock({ nodes: [0, 1, 2].map(endpoint) }), { clockSpacingMs: SPACING_MS });
    expect(report.ok).toBe(true);
    expect(report.findings.map((f) => f.code)).toEqual(["QUORUM_OK"]);
    for (const check of report.nodes) {
      expect(codes(check)?.slice(0, 3)).toEqual(["REACHABLE", "WRITES_OK", "SCRIPTS_OK"]);
      // A clock compared with itself: within the measurement's own bound (NTP may slew the wall
      // clock TIME reads by up to 0.05 %), never flagged as off. Inconclusive only on a very busy machine.
      const rate = check.clockRate;
      expect(rate).toBeDefined();
      expect(Math.abs((rate?.ratio ?? 0) - 1)).toBeLessThanOrEqual((rate?.uncertainty ?? 0) + 0.001);
      expect(["CLOCK_RATE_OK", "CLOCK_RATE_INCONCLUSIVE"]).toContain(codes(check)?.[3]);
      // The bridge refuses CONFIG and forwards INFO: the settings come from INFO.
      expect(check.settings).toEqual({ source: "info", evictionPolicy: "noeviction", maxmemoryBytes: 0, aof: false });
      expect(finding(check, "EVICTION_OFF")?.level).toBe("ok");
      expect(finding(check, "PERSISTENCE_NO_AOF")?.level).toBe("warn");
    }
    const after = cluster.commandCounts();
    for (const [i, counts] of after.entries()) {
      const sent = (name: string) => (counts[name] ?? 0) - (before[i]?.[name] ?? 0);
      // At most 8 requests per node: PING, SET, EVAL, EVALSHA, TIME twice, CONFIG, INFO.
      expect([
        sent("ping"),
        sent("set"),
        sent("eval"),
        sent("evalsha"),
        sent("time"),
        sent("config"),
        sent("info"),
      ]).toEqual([1, 1, 1, 1, 2, 1, 1]);
    }
  }, 30_000);

  it("warns of a node set to maxmemory-policy allkeys-lru (through its redis port), and of that node alone", async () => {
    await direct(1, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru");
    try {
      const report = await checkNodes(new Redlock({ nodes: [0, 1, 2].map(endpoint) }), { clockSpacingMs: 1 });
      const evicting = finding(report.nodes[1], "EVICTION_ON");
      expect(evicting?.level).toBe("warn");
      expect(evicting?.message).toContain("maxmemory-policy allkeys-lru");
      expect(evicting?.message).toContain("evicts any key");
      expect(evicting?.advice).toContain("noeviction");
      expect(report.nodes[1]?.settings?.evictionPolicy).toBe("allkeys-lru");
      expect(finding(report.nodes[0], "EVICTION_OFF")).toBeDefined();
      expect(finding(report.nodes[2], "EVICTION_OFF")).toBeDefined();
      expect(report.summary.some((line) => line.startsWith("  warn EVICTION_ON:"))).toBe(true);
    } finally {
      await direct(1, "CONFIG", "SET", "maxmemory-policy", "noeviction");
    }
  }, 30_000);

  it("reads CONFIG GET where the endpoint serves it: eviction policy, AOF with its fsync, the snapshot schedule", async () => {
    await direct(2, "CONFIG", "SET", "appendonly", "yes");
    try {
      const nodes = [endpoint(0), endpoint(1), { url: adminBridge.url, token: adminToken }];
      const report = await checkNodes(new Redlock({ nodes }), { clockSpacingMs: 1 });
      expect(report.nodes[2]?.settings).toEqual({
        source: "config",
        evictionPolicy: "noeviction",
        maxmemoryBytes: 0,
        aof: true,
        appendfsync: "everysec",
        snapshots: "",
      });
      expect(finding(report.nodes[2], "PERSISTENCE_AOF")?.message).toContain("appendfsync everysec");
      expect(finding(report.nodes[0], "PERSISTENCE_NO_AOF")?.message).toContain("snapshots unknown");
    } finally {
      await direct(2, "CONFIG", "SET", "appendonly", "no");
    }
  }, 30_000);

  it("negative controls: a wrong token, a wrong URL path, a closed port and a clock at 1.1× are each caught, and no token shows", async () => {
    const wrongToken = "not-the-token-of-this-node-0123456789";
    const nodes: RedisNode[] = [
      restNode({ url: endpoint(0).url, token: wrongToken }),
      restNode({ url: `${endpoint(1).url}/v2/redis`, token: endpoint(1).token }),
      restNode({ url: `http://127.0.0.1:${await closedPort()}`, token: "token-of-a-node-that-is-not-there" }),
      fastClock(restNode(endpoint(2)), 1.1),
      restNode(endpoint(1)),
    ];
    const report = await checkNodes(new Redlock({ nodes }), { clockSpacingMs: SPACING_MS });
    expect(codes(report.nodes[0])).toEqual(["AUTH_REJECTED"]);
    expect(report.nodes[0]?.findings[0]?.message).toContain("HTTP 401");
    expect(codes(report.nodes[1])).toEqual(["NOT_REST_ENDPOINT"]);
    expect(report.nodes[1]?.findings[0]?.message).toContain("HTTP 404");
    expect(codes(report.nodes[2])).toEqual(["UNREACHABLE"]);
    const fast = report.nodes[3];
    expect(finding(fast, "CLOCK_RATE_FAST")?.level).toBe("error");
    expect(fast?.clockRate?.ratio).toBeGreaterThan(1.1 - (fast?.clockRate?.uncertainty ?? 0) - 0.001);
    expect(fast?.clockRate?.ratio).toBeLessThan(1.1 + (fast?.clockRate?.uncertainty ?? 0) + 0.001);
    expect(report.nodes.map((n) => n.level)).toEqual(["error", "error", "error", "error", "warn"]);
    expect(report.ok).toBe(false);
    expect(report.findings.map((f) => f.code)).toEqual(["QUORUM_UNREACHABLE"]);
    const text = `${JSON.stringify(report)}\n${report.summary.join("\n")}`;
    for (const secret of [wrongToken, ...cluster.nodes.map((n) => n.token), "token-of-a-node-that-is-not-there"])
      expect(text).not.toContain(secret);
  }, 30_000);
});
