/**
 * The bridge refuses the commands Upstash refuses over REST (server administration, replication,
 * scripts and functions control, client control, cluster) unless it was started with
 * `allowAdminCommands` (`--allow-admin-commands`): any client holding the token could otherwise
 * stop, reconfigure or freeze the redis-server behind it. Checked on the redis-server itself
 * through a direct connection. Its own nodes: a refusal that failed would take its server down.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NodeCluster, type NodeInfo, startNodes } from "../../tools/nodes/index.js";
import { type Bridge, startBridge } from "../../tools/rest-bridge/index.js";

let cluster: NodeCluster;
let node: NodeInfo;
let redis: IORedis;

beforeAll(async () => {
  cluster = await startNodes({ count: 1 });
  node = cluster.nodes[0] as NodeInfo;
  redis = new IORedis({ port: node.redisPort, protocol: 2, lazyConnect: true, maxRetriesPerRequest: 0 });
  // Reported by the assertions (the server gone), not as unhandled error events.
  redis.on("error", () => {});
  await redis.connect();
});

afterAll(async () => {
  redis?.disconnect();
  await cluster?.stop();
});

async function post(url: string, token: string, path: string, body: unknown) {
  const response = await fetch(url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as unknown };
}

/** The redis-server is up, unpaused, still a master, and its configuration untouched. */
async function expectServerIntact(): Promise<void> {
  expect(cluster.pids()).toEqual([node.pid]);
  expect(await redis.ping()).toBe("PONG");
  expect(await redis.config("GET", "maxmemory")).toEqual(["maxmemory", "0"]);
  expect(String(await redis.call("ROLE")).startsWith("master")).toBe(true);
}

const ADMIN_COMMANDS: string[][] = [
  ["CONFIG", "SET", "maxmemory", "1mb"],
  ["config", "get", "maxmemory"],
  ["DEBUG", "SLEEP", "0"],
  ["CLIENT", "PAUSE", "60000"],
  ["CLIENT", "KILL", "TYPE", "normal"],
  ["SCRIPT", "KILL"],
  ["FUNCTION", "FLUSH"],
  ["FCALL", "f", "0"],
  ["REPLICAOF", "127.0.0.1", "1"],
  ["SLAVEOF", "127.0.0.1", "1"],
  ["FAILOVER"],
  ["MIGRATE", "127.0.0.1", "1", "k", "0", "1000"],
  ["MODULE", "LIST"],
  ["SAVE"],
  ["BGSAVE"],
  ["BGREWRITEAOF"],
  ["SLOWLOG", "RESET"],
  ["LATENCY", "RESET"],
  ["CLUSTER", "INFO"],
  ["ACL", "SETUSER", "default", "off"],
  ["MONITOR"],
  ["SHUTDOWN", "NOSAVE"],
  ["Shutdown"],
];

describe("admin commands (finding 9)", () => {
  it("are refused one by one: 400 JSON naming the command, nothing reaches the redis-server", async () => {
    for (const command of ADMIN_COMMANDS) {
      const reply = await post(node.url, node.token, "/", command);
      expect({ command, status: reply.status }).toEqual({ command, status: 400 });
      expect((reply.body as { error: string }).error).toMatch(/^ERR Command is not available: '[a-z ]+'/);
    }
    await expectServerIntact();
  });

  it("are refused inside a pipeline (that element only) and a transaction (all of it)", async () => {
    await redis.del("admin:a", "admin:b");
    const pipeline = await post(node.url, node.token, "/pipeline", [
      ["SET", "admin:a", "1"],
      ["CONFIG", "SET", "maxmemory", "1mb"],
      ["SHUTDOWN", "NOSAVE"],
      ["GET", "admin:a"],
    ]);
    expect(pipeline.status).toBe(200);
    expect(pipeline.body).toEqual([
      { result: "OK" },
      { error: expect.stringMatching(/^ERR Command is not available: 'config'/) },
      { error: expect.stringMatching(/^ERR Command is not available: 'shutdown'/) },
      { result: "1" },
    ]);
    const transaction = await post(node.url, node.token, "/multi-exec", [
      ["SET", "admin:b", "1"],
      ["SHUTDOWN", "NOSAVE"],
    ]);
    expect(transaction.status).toBe(400);
    expect((transaction.body as { error: string }).error).toMatch(/^EXECABORT .*'shutdown'/);
    expect(await redis.get("admin:b")).toBeNull();
    await expectServerIntact();
  });

  it("the commands the library and @upstash/redis need still work", async () => {
    for (const [command, expected] of [
      [["SET", "admin:ok", "v", "NX", "PX", 10_000], "OK"],
      [["EVAL", "return redis.call('get', KEYS[1])", 1, "admin:ok"], "v"],
      [["SCRIPT", "LOAD", "return 1"], expect.stringMatching(/^[0-9a-f]{40}$/)],
      [["SCRIPT", "EXISTS", "0000000000000000000000000000000000000000"], [0]],
      [["PTTL", "admin:ok"], expect.any(Number)],
      [["DBSIZE"], expect.any(Number)],
      [["TIME"], expect.any(Array)],
      [["PING"], "PONG"],
    ] as [unknown[], unknown][]) {
      const reply = await post(node.url, node.token, "/", command);
      expect({ command, ...reply }).toEqual({ command, status: 200, body: { result: expected } });
    }
  });
});

describe("allowAdminCommands (finding 9)", () => {
  let bridge: Bridge;
  const token = "admin-allowed-token";

  beforeAll(async () => {
    bridge = await startBridge({ redisPort: node.redisPort, token, allowAdminCommands: true });
    // The bridge listens before its Redis connection is up, and answers 503 until it is.
    await bridge.ready();
  });
  afterAll(async () => {
    await bridge?.close();
  });

  it("lets admin commands through when the bridge was started with it", async () => {
    expect(await post(bridge.url, token, "/", ["CONFIG", "GET", "maxmemory"])).toEqual({
      status: 200,
      body: { result: ["maxmemory", "0"] },
    });
    expect(await post(bridge.url, token, "/", ["SLOWLOG", "LEN"])).toEqual({
      status: 200,
      body: { result: expect.any(Number) },
    });
  });

  it("still refuses what would hijack or block the bridge's one connection", async () => {
    for (const command of [["MONITOR"], ["BLPOP", "q", "0"], ["SUBSCRIBE", "c"], ["CLIENT", "REPLY", "OFF"]]) {
      const reply = await post(bridge.url, token, "/", command);
      expect({ command, status: reply.status }).toEqual({ command, status: 400 });
    }
    await expectServerIntact();
  });

  it("is also a CLI flag: --allow-admin-commands", async () => {
    const run = async (flags: string[]) => {
      const child = startCli(["--redis-port", String(node.redisPort), "--token", token, ...flags]);
      try {
        const url = await listeningUrl(child);
        // The bridge listens before its Redis connection is up (it answers 503 until then).
        for (const deadline = Date.now() + 15_000; Date.now() < deadline; ) {
          if ((await post(url, token, "/", ["PING"])).status === 200) break;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        return await post(url, token, "/", ["CONFIG", "GET", "maxmemory"]);
      } finally {
        await stopChild(child);
      }
    };
    expect((await run([])).status).toBe(400);
    expect(await run(["--allow-admin-commands"])).toEqual({ status: 200, body: { result: ["maxmemory", "0"] } });
  });
});

const CLI = fileURLToPath(new URL("../../tools/rest-bridge/cli.ts", import.meta.url));

function startCli(args: string[]): ChildProcess {
  const tsx = createRequire(import.meta.url).resolve("tsx");
  return spawn(process.execPath, ["--import", tsx, CLI, ...args], { stdio: ["ignore", "pipe", "pipe"] });
}

function listeningUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = "";
    const timer = setTimeout(() => reject(new Error(`the bridge CLI did not start:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /url=(http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the bridge CLI exited (${code}):\n${output}`));
    });
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
}

describe("a script that never ends (finding 9)", () => {
  it("is killed once it outlives the command deadline, and the node serves again", async () => {
    const token = "busy-script-token";
    const bridge = await startBridge({ redisPort: node.redisPort, token, commandTimeoutMs: 1000 });
    try {
      // So that the script meets a connected bridge (it answers 503 until then).
      await bridge.ready();
      const stuck = await post(bridge.url, token, "/", ["EVAL", "while true do end", "0"]);
      expect(stuck.status).toBe(504);
      // Redis serves SCRIPT KILL once the script has run for its busy threshold (5 s by default);
      // until then every client gets BUSY. Allow it 30 s.
      let answer: unknown;
      for (const deadline = Date.now() + 30_000; Date.now() < deadline; ) {
        answer = await redis.ping().catch((err: Error) => err.message);
        if (answer === "PONG") break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      expect(answer).toBe("PONG");
      expect(await post(node.url, node.token, "/", ["PING"])).toEqual({ status: 200, body: { result: "PONG" } });
    } finally {
      await bridge.close();
    }
  }, 60_000);
});
