/**
 * `checkNodes(redlock)` on the memory nodes of `edge-redlock/testing`, and on nodes that answer
 * wrong in each way the preflight must tell apart: down, silent, a rejected token, a wrong URL
 * path, a read-only token, no script cache, a clock running fast or slow, an evicting or
 * non-persistent server. Each finding is asserted by its code and level; the negative controls are
 * the healthy nodes, which must come out clean.
 */
import { describe, expect, it } from "vitest";
import {
  AbortedError,
  checkNodes,
  InvalidArgumentError,
  type NodeCheck,
  NodeError,
  type RedisArgument,
  type RedisNode,
  type RedisReply,
  Redlock,
  restNode,
} from "../../../src/index.js";
import { type MemoryNode, memoryNode } from "../../../src/testing/index.js";
import { fakeClock } from "../support/fake-node.js";
import { run, useFakeTime } from "../support/fake-time.js";

/** Enough spacing for the clock check to be conclusive on memory nodes (round trips of microseconds). */
const SPACING = 200;
/** The spacing of the check on healthy nodes, where the rate must come out as OK, not inconclusive. */
const HEALTHY_SPACING = 1000;

const codes = (check: NodeCheck | undefined) => check?.findings.map((f) => f.code);
const finding = (check: NodeCheck | undefined, code: string) => check?.findings.find((f) => f.code === code);

/** A memory node whose answers to some commands are replaced. */
function answering(
  node: MemoryNode,
  answers: Record<string, (args: readonly RedisArgument[]) => RedisReply | Promise<RedisReply>>,
): RedisNode {
  return {
    id: node.id,
    command(args, signal) {
      const answer = answers[String(args[0]).toUpperCase()];
      return answer ? Promise.resolve().then(() => answer(args)) : node.command(args, signal);
    },
  };
}

/** A Redis error answer, as a REST node reports one. */
const redisError = (id: string, text: string) =>
  new NodeError(id, `${id} answered with an error (HTTP 400): ${text}`, { status: 400, redisError: text });

/** A memory node whose clock runs `rate` times as fast as real time. */
function skewed(rate: number, id: string): MemoryNode {
  const start = Date.now();
  return memoryNode({ id, clock: { now: () => start + (Date.now() - start) * rate } });
}

describe("checkNodes on healthy memory nodes", () => {
  it("finds every node reachable, writable, running scripts, with its clock in rate; what it cannot read is unknown, not a failure", async () => {
    const nodes = [memoryNode(), memoryNode(), memoryNode()];
    // A second between the two readings: a clock in rate is told apart from driftFactor (0.01)
    // while the round trips stay under 10 ms, which a loaded machine's event loop can pass at 200.
    const report = await checkNodes(new Redlock({ nodes }), { clockSpacingMs: HEALTHY_SPACING });
    expect(report.ok).toBe(true);
    expect(report.level).toBe("ok");
    expect(report.quorum).toBe(2);
    expect(report.findings.map((f) => f.code)).toEqual(["QUORUM_OK"]);
    for (const [i, check] of report.nodes.entries()) {
      expect(check.node).toBe(nodes[i]?.id);
      expect(check.level).toBe("ok");
      expect(codes(check)).toEqual([
        "REACHABLE",
        "WRITES_OK",
        "SCRIPTS_OK",
        "CLOCK_RATE_OK",
        "EVICTION_UNKNOWN",
        "PERSISTENCE_UNKNOWN",
      ]);
      expect(check.latencyMs).toBeGreaterThanOrEqual(0);
      expect(check.clockRate?.localElapsedMs).toBeGreaterThanOrEqual(HEALTHY_SPACING - 1);
      expect(Math.abs((check.clockRate?.ratio ?? 0) - 1)).toBeLessThanOrEqual(check.clockRate?.uncertainty ?? 0);
      expect(check.settings).toBeUndefined();
    }
    expect(report.summary[0]).toBe("preflight of 3 nodes (quorum 2): 0 errors, 0 warnings");
    expect(report.summary).toHaveLength(4);
    expect(report.summary[1]).toMatch(
      /^ {2}ok +memory-\d+ +ping [\d.]+ ms, clock ×[\d.]+, eviction unknown, persistence unknown$/,
    );
  });

  it("writes one probe key per node, under keyPrefix and the reserved namespace, with a TTL", async () => {
    const nodes = [memoryNode(), memoryNode(), memoryNode()];
    await checkNodes(new Redlock({ nodes, keyPrefix: "app:" }), { clockSpacingMs: 1 });
    for (const node of nodes) {
      const keys = node.keys().filter((key) => !key.includes(":cluster:"));
      expect(keys).toHaveLength(1);
      expect(keys[0]).toMatch(/^app:__edge-redlock__:preflight:[0-9a-f]{40}$/);
      expect(node.pttl(keys[0] as string)).toBeGreaterThan(0);
      expect(node.pttl(keys[0] as string)).toBeLessThanOrEqual(10_000);
    }
  });
});

describe("checkNodes: the node clock's rate", () => {
  // On fake time, for the node clocks (Date.now()) and the client's alike: on real time a reading
  // lands anywhere within its round trip, and a starved process (2 shared cores under load) drew
  // round trips of up to 190 ms around a 200 ms spacing, and ratios from 0.57 to 1.30 for 1.1.
  useFakeTime();
  /** `checkNodes` on a client of `nodes` on the fake clock, fake time moving on until it ends. */
  const checkOnFakeTime = (nodes: RedisNode[], options: Parameters<typeof checkNodes>[1], driftFactor?: number) =>
    run(checkNodes(new Redlock({ nodes, clock: fakeClock, driftFactor }), options), 5);

  it("flags a node whose clock runs 1.1× as fast as an error: its keys expire early", async () => {
    const nodes = [memoryNode(), skewed(1.1, "fast"), memoryNode()];
    const report = await checkOnFakeTime(nodes, { clockSpacingMs: SPACING });
    const fast = report.nodes[1];
    expect(fast?.level).toBe("error");
    expect(finding(fast, "CLOCK_RATE_FAST")?.level).toBe("error");
    expect(fast?.clockRate?.ratio).toBeGreaterThan(1.09);
    expect(fast?.clockRate?.ratio).toBeLessThan(1.11);
    expect(report.ok).toBe(false);
    // The others are untouched, and 2 of 3 healthy nodes are exactly the quorum.
    expect(report.nodes.filter((n) => n.level === "ok")).toHaveLength(2);
    expect(report.findings.map((f) => [f.code, f.level])).toEqual([["QUORUM_NO_MARGIN", "warn"]]);
    expect(report.summary.some((line) => line.includes("error CLOCK_RATE_FAST: fast's clock runs fast"))).toBe(true);
  });

  it("bounds the ratio by the round trips, wherever within them the node read its clock", async () => {
    // A 1.1× node that reads its clock as a request arrives and answers the first TIME 150 ms
    // later: taken at the round trip's midpoint, that reading is 75 ms late, and the ratio comes
    // out at 1.4. The true ratio must still be within ratio ± uncertainty.
    const fast = skewed(1.1, "fast");
    let times = 0;
    const lateFirstAnswer: RedisNode = {
      id: fast.id,
      async command(args, signal) {
        const reply = await fast.command(args, signal);
        if (args[0] === "TIME" && times++ === 0) await new Promise((r) => setTimeout(r, 150));
        return reply;
      },
    };
    const report = await checkOnFakeTime([lateFirstAnswer], { clockSpacingMs: SPACING });
    const rate = report.nodes[0]?.clockRate;
    expect(rate?.ratio).toBeCloseTo(1.4, 6);
    expect(Math.abs((rate?.ratio ?? 0) - 1.1)).toBeLessThanOrEqual(rate?.uncertainty ?? 0);
    // Negative control: on the same node, answered at once, the bound is tight.
    const prompt = await checkOnFakeTime([skewed(1.1, "prompt")], { clockSpacingMs: SPACING });
    expect(prompt.nodes[0]?.clockRate?.uncertainty).toBeLessThan(0.011);
  });

  it("compares against the client's driftFactor: 1.1× passes with driftFactor 0.2", async () => {
    const report = await checkOnFakeTime([skewed(1.1, "fast")], { clockSpacingMs: SPACING }, 0.2);
    expect(finding(report.nodes[0], "CLOCK_RATE_OK")?.message).toContain("within driftFactor 0.2");
  });

  it("warns of a clock running 0.9× as fast (safe for the holder, but off)", async () => {
    const report = await checkOnFakeTime([skewed(0.9, "slow")], { clockSpacingMs: SPACING });
    expect(finding(report.nodes[0], "CLOCK_RATE_SLOW")?.level).toBe("warn");
    expect(report.ok).toBe(true);
  });

  it("says it cannot tell when the round trips are long against the spacing, instead of guessing", async () => {
    const nodes = [memoryNode({ latencyMs: 30 })];
    const report = await checkOnFakeTime(nodes, { clockSpacingMs: 60 });
    const inconclusive = finding(report.nodes[0], "CLOCK_RATE_INCONCLUSIVE");
    expect(inconclusive?.level).toBe("warn");
    expect(inconclusive?.advice).toContain("clockSpacingMs");
    // About a 30 ms round trip over the 90 ms between the two readings' midpoints.
    expect(report.nodes[0]?.clockRate?.uncertainty).toBeGreaterThan(0.25);
  });

  it("reports a node that refuses TIME as unknown (level ok), and one answering it wrongly the same way", async () => {
    const refuses = answering(memoryNode(), {
      TIME: () => Promise.reject(redisError("x", "ERR unknown command 'TIME'")),
    });
    const garbles = answering(memoryNode(), { TIME: () => ["soon"] });
    const report = await checkOnFakeTime([refuses, garbles, memoryNode()], { clockSpacingMs: SPACING });
    for (const check of report.nodes.slice(0, 2)) {
      expect(finding(check, "CLOCK_UNKNOWN")?.level).toBe("ok");
      expect(check.clockRate).toBeUndefined();
    }
    expect(report.ok).toBe(true);
  });
});

describe("checkNodes: nodes that cannot take locks", () => {
  it("reports a down node and a silent one as unreachable, and a quorum that cannot form", async () => {
    const down = memoryNode({ id: "down" });
    down.down();
    const silent: RedisNode = { id: "silent", command: () => new Promise<never>(() => {}) };
    const report = await checkNodes(new Redlock({ nodes: [down, silent, memoryNode()] }), {
      clockSpacingMs: 1,
      requestTimeoutMs: 100,
    });
    expect(codes(report.nodes[0])).toEqual(["UNREACHABLE"]);
    expect(report.nodes[0]?.findings[0]?.message).toContain("connection refused");
    expect(codes(report.nodes[1])).toEqual(["UNREACHABLE"]);
    expect(report.nodes[1]?.findings[0]?.message).toContain("no answer from silent within 100 ms");
    expect(report.nodes[1]?.latencyMs).toBeUndefined();
    expect(report.findings.map((f) => [f.code, f.level])).toEqual([["QUORUM_UNREACHABLE", "error"]]);
    expect(report.summary.filter((line) => line.includes("no answer"))).toHaveLength(2);
  });

  it("tells a rejected token (401, 403) and a wrong URL path (404 JSON or HTML, 405, a 200 HTML page) apart from an outage, without any token in the report", async () => {
    const token = "the-rest-token-that-must-not-leak";
    const node = (path: string, status: number, body: string) =>
      restNode({
        url: `https://db.example.test${path}`,
        token,
        // A proxy that echoes the Authorization header into its body: the report must still not show it.
        fetch: async (_input, init) =>
          new Response(body.replace("ECHO", String(new Headers(init?.headers).get("authorization"))), { status }),
      });
    const nodes = [
      node("/a", 401, '{"error":"Unauthorized ECHO"}'),
      node("/b", 403, "forbidden ECHO"),
      node("/c", 404, '{"error":"ERR not found: /c ECHO"}'),
      node("/d", 404, "<!doctype html><p>Not found ECHO</p>"),
      node("/e", 405, '{"error":"ERR method not allowed ECHO"}'),
      node("/f", 200, "<html>a login page ECHO</html>"),
      node("/g", 502, "<html>bad gateway ECHO</html>"),
    ];
    const report = await checkNodes(new Redlock({ nodes }), { clockSpacingMs: 1 });
    expect(report.nodes.map((n) => n.findings.map((f) => `${f.code}:${f.level}`))).toEqual([
      ["AUTH_REJECTED:error"],
      ["AUTH_REJECTED:error"],
      ["NOT_REST_ENDPOINT:error"],
      ["NOT_REST_ENDPOINT:error"],
      ["NOT_REST_ENDPOINT:error"],
      ["NOT_REST_ENDPOINT:error"],
      ["UNREACHABLE:error"],
    ]);
    expect(JSON.stringify(report)).not.toContain(token);
    expect(report.summary.join("\n")).not.toContain(token);
  });

  it("reports a read-only token (writes refused) while the scripts still read", async () => {
    const readOnly = answering(memoryNode(), {
      SET: () => Promise.reject(redisError("ro", "NOPERM this user has no permissions to run the 'set' command")),
    });
    const report = await checkNodes(new Redlock({ nodes: [readOnly, memoryNode(), memoryNode()] }), {
      clockSpacingMs: 1,
    });
    const check = report.nodes[0];
    expect(finding(check, "WRITES_REFUSED")?.level).toBe("error");
    expect(finding(check, "WRITES_REFUSED")?.message).toContain("NOPERM");
    expect(finding(check, "SCRIPTS_OK")).toBeDefined();
  });

  it("reports an endpoint without scripts, and one whose EVALSHA never finds a script", async () => {
    const noScripts = answering(memoryNode(), {
      EVAL: () => Promise.reject(redisError("n", "ERR unknown command 'EVAL'")),
    });
    const noCache = answering(memoryNode(), {
      EVALSHA: () => Promise.reject(redisError("c", "NOSCRIPT No matching script. Please use EVAL.")),
    });
    const wrongReply = answering(memoryNode(), { EVALSHA: () => [null, -2] });
    const report = await checkNodes(new Redlock({ nodes: [noScripts, noCache, wrongReply] }), { clockSpacingMs: 1 });
    expect(finding(report.nodes[0], "SCRIPTS_REFUSED")?.message).toContain("with EVAL: ");
    expect(finding(report.nodes[1], "SCRIPT_CACHE_MISSING")?.level).toBe("warn");
    expect(finding(report.nodes[2], "SCRIPTS_REFUSED")?.message).toContain("did not read back the probe key");
  });
});

describe("checkNodes: eviction and persistence, where the node tells them", () => {
  it("reads CONFIG GET: an allkeys policy and a volatile one are warned of, noeviction is fine; AOF or not", async () => {
    const config = (policy: string, appendonly: string, save: string) => () => [
      "maxmemory-policy",
      policy,
      "maxmemory",
      "0",
      "appendonly",
      appendonly,
      "appendfsync",
      "everysec",
      "save",
      save,
    ];
    const nodes = [
      answering(memoryNode(), { CONFIG: config("allkeys-lru", "no", "") }),
      answering(memoryNode(), { CONFIG: config("volatile-ttl", "no", "3600 1") }),
      answering(memoryNode(), { CONFIG: config("noeviction", "yes", "") }),
    ];
    const report = await checkNodes(new Redlock({ nodes, faultTolerance: 0 }), { clockSpacingMs: 1 });
    const [allkeys, volatile, safe] = report.nodes;
    expect(allkeys?.settings).toEqual({
      source: "config",
      evictionPolicy: "allkeys-lru",
      maxmemoryBytes: 0,
      aof: false,
      appendfsync: "everysec",
      snapshots: "",
    });
    expect(finding(allkeys, "EVICTION_ON")).toMatchObject({ level: "warn" });
    expect(finding(allkeys, "EVICTION_ON")?.message).toContain("evicts any key");
    expect(finding(allkeys, "EVICTION_ON")?.message).toContain("maxmemory is 0");
    expect(finding(allkeys, "PERSISTENCE_NO_AOF")?.message).toContain("no snapshots either");
    expect(finding(allkeys, "PERSISTENCE_NO_AOF")?.advice).toContain("faultTolerance (now 0)");
    expect(finding(volatile, "EVICTION_ON")?.message).toContain("every lock key has one");
    expect(finding(volatile, "PERSISTENCE_NO_AOF")?.message).toContain("snapshots only (save 3600 1)");
    expect(finding(safe, "EVICTION_OFF")?.level).toBe("ok");
    expect(finding(safe, "PERSISTENCE_AOF")?.message).toContain("appendfsync everysec");
    expect(report.ok).toBe(true);
    expect(report.level).toBe("warn");
    expect(report.summary[1]).toContain("eviction allkeys-lru, persistence none");
    expect(report.summary[3]).toContain("eviction noeviction, persistence AOF (everysec)");
  });

  it("falls back to INFO when CONFIG is refused (as the REST bridge and managed services do)", async () => {
    const info = [
      "# Memory",
      "used_memory:1000",
      "maxmemory:1048576",
      "maxmemory_policy:allkeys-lfu",
      "",
      "# Persistence",
      "aof_enabled:0",
      "",
    ].join("\r\n");
    const node = answering(memoryNode(), {
      CONFIG: () => Promise.reject(redisError("i", "ERR Command is not available: 'config'")),
      INFO: () => info,
    });
    const report = await checkNodes(new Redlock({ nodes: [node] }), { clockSpacingMs: 1 });
    expect(report.nodes[0]?.settings).toEqual({
      source: "info",
      evictionPolicy: "allkeys-lfu",
      maxmemoryBytes: 1_048_576,
      aof: false,
    });
    expect(finding(report.nodes[0], "EVICTION_ON")?.message).not.toContain("maxmemory is 0");
    expect(finding(report.nodes[0], "PERSISTENCE_NO_AOF")?.message).toContain("snapshots unknown");
  });

  it("treats a node that answers neither, or answers nonsense, as unknown: never a failure", async () => {
    const nonsense = answering(memoryNode(), { CONFIG: () => "OK", INFO: () => ["not", "info"] });
    const silentAfterPing = answering(memoryNode(), {
      CONFIG: () => new Promise<never>(() => {}),
      INFO: () => new Promise<never>(() => {}),
    });
    // Each node's level must come out ok, its clock included: read a second apart (see HEALTHY_SPACING).
    const report = await checkNodes(new Redlock({ nodes: [nonsense, silentAfterPing, memoryNode()] }), {
      clockSpacingMs: HEALTHY_SPACING,
      requestTimeoutMs: 100,
    });
    for (const check of report.nodes) {
      expect(finding(check, "EVICTION_UNKNOWN")?.level).toBe("ok");
      expect(finding(check, "PERSISTENCE_UNKNOWN")?.level).toBe("ok");
      expect(check.level).toBe("ok");
    }
  });
});

describe("checkNodes: its own input", () => {
  it("refuses what is not a Redlock client, unknown options and bad values, before sending anything", async () => {
    const redlock = new Redlock({ nodes: [memoryNode()] });
    await expect(checkNodes({} as Redlock)).rejects.toThrow(InvalidArgumentError);
    await expect(checkNodes(null as unknown as Redlock)).rejects.toThrow(InvalidArgumentError);
    await expect(checkNodes(redlock, { clockSpacing: 5 } as never)).rejects.toThrow(/unknown option "clockSpacing"/);
    await expect(checkNodes(redlock, { clockSpacingMs: 0 })).rejects.toThrow(/clockSpacingMs/);
    await expect(checkNodes(redlock, { requestTimeoutMs: 1.5 })).rejects.toThrow(/requestTimeoutMs/);
    await expect(checkNodes(redlock, { signal: "stop" as never })).rejects.toThrow(/AbortSignal/);
  });

  it("rejects with AbortedError when its signal aborts, before or during the check", async () => {
    const redlock = new Redlock({ nodes: [memoryNode(), memoryNode(), memoryNode()] });
    await expect(checkNodes(redlock, { signal: AbortSignal.abort("stop") })).rejects.toThrow(AbortedError);
    const controller = new AbortController();
    const running = checkNodes(redlock, { signal: controller.signal, clockSpacingMs: 10_000 });
    setTimeout(() => controller.abort("stop"), 50);
    await expect(running).rejects.toBeInstanceOf(AbortedError);
  });
});
