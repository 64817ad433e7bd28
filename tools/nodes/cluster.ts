import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DelayPhase } from "../rest-bridge/app.js";
import { type Bridge, startBridge } from "../rest-bridge/bridge.js";
import { ensureRedisServer } from "./ensure-redis.js";
import { createOrphanGuard, type OrphanGuardMode } from "./orphan-guard.js";
import { isProcessAlive, sleep } from "./process-utils.js";
import { type RedisServerProcess, startRedisServer } from "./redis-server.js";

/** One node: a redis-server and the REST bridge in front of it. */
export interface NodeInfo {
  /** Position in {@link NodeCluster.nodes}. */
  readonly index: number;
  /** Bridge base URL, e.g. "http://127.0.0.1:40123". */
  readonly url: string;
  /** Bearer token of this node's bridge (32 random bytes, hex). */
  readonly token: string;
  /** Port of the redis-server (stays the same across {@link NodeCluster.restart}). */
  readonly redisPort: number;
  /** Port of the bridge. */
  readonly bridgePort: number;
  /** PID of the redis-server; updated by restart, and left as the last PID after kill. */
  readonly pid: number;
}

/** A set of independent nodes, as a Redlock needs. */
export interface NodeCluster {
  readonly nodes: readonly NodeInfo[];
  /** Temporary directory holding the nodes' --dir folders; removed by {@link NodeCluster.stop}. */
  readonly dataDir: string;
  /** SIGKILLs node i's redis-server and waits until it is gone. Its bridge then answers 503. */
  kill(i: number): Promise<void>;
  /** SIGSTOPs node i's redis-server: requests hang until the bridge's command timeout. */
  pause(i: number): void;
  /** SIGCONTs node i's redis-server. */
  resume(i: number): void;
  /**
   * Starts node i's redis-server again on the same port, empty (killing it first if it runs),
   * and resolves once its bridge answers PING.
   */
  restart(i: number): Promise<void>;
  /** Delays every response of node i's bridge by `ms` (see {@link Bridge.setDelay}). */
  setDelay(i: number, ms: number, phase?: DelayPhase): void;
  /** Adds a random delay in `[0, maxMs)` before each command of node i (see {@link Bridge.setJitter}). */
  setJitter(i: number, maxMs: number): void;
  /** HTTP requests each node's bridge has received so far, by node index. */
  requestCounts(): number[];
  /** Commands each node's bridge has received so far, by lower-case name, by node index. */
  commandCounts(): Record<string, number>[];
  /** PIDs of the redis-servers currently running. */
  pids(): number[];
  /** Stops every bridge and redis-server, waits for the processes to exit, removes the temp dir. */
  stop(): Promise<void>;
}

/** Options of {@link startNodes}. */
export interface StartNodesOptions {
  /** Number of nodes. Default 5. */
  count?: number;
  /** Diagnostics (redis-server output, bridge connection events). Silent when omitted. */
  log?: (message: string) => void;
  /** Bridge command timeout (see {@link BridgeOptions.commandTimeoutMs}). Default 10 000 ms. */
  commandTimeoutMs?: number;
  /** How children are kept from outliving this process. Default "auto". */
  orphanGuard?: OrphanGuardMode;
}

const DIR_PREFIX = "edge-redlock-nodes-";
const OWNER_FILE = "owner.pid";

/** What a node owns. Filled in as things start, so a half-started node can still be cleaned up. */
interface NodeResources {
  dir: string;
  redis?: RedisServerProcess;
  bridge?: Bridge;
}

/** A started node; `redis` is replaced by restart(), and `info.pid` follows it. */
type RunningNode = NodeResources & {
  redis: RedisServerProcess;
  bridge: Bridge;
  info: { -readonly [K in keyof NodeInfo]: NodeInfo[K] };
};

/**
 * Starts `count` nodes, each a redis-server on a free loopback port (no persistence, --dir in a
 * fresh temp directory) with its own in-process REST bridge and random token. Resolves when every
 * node answers PING through its bridge.
 */
export async function startNodes(options: StartNodesOptions = {}): Promise<NodeCluster> {
  const count = options.count ?? 5;
  if (!Number.isInteger(count) || count < 1) throw new RangeError(`invalid node count: ${count}`);
  const binary = ensureRedisServer(options.log ? { log: options.log } : {});
  sweepStaleDirs();

  const dataDir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
  writeFileSync(join(dataDir, OWNER_FILE), String(process.pid));
  const guard = createOrphanGuard(options.orphanGuard ?? "auto", dataDir);

  const resources: NodeResources[] = [];
  // Last resort for exits that skip stop() (uncaught exception, process.exit): kill synchronously.
  const killAllSync = () => {
    for (const node of resources) node.redis?.signal("SIGKILL");
  };
  process.on("exit", killAllSync);

  const spawnRedis = (dir: string, port?: number) =>
    startRedisServer({
      binary,
      dir,
      guard,
      log: options.log,
      ...(port === undefined ? {} : { port }),
    });

  const startNode = async (index: number): Promise<RunningNode> => {
    const owned: NodeResources = { dir: join(dataDir, `node-${index}`) };
    resources.push(owned);
    mkdirSync(owned.dir);
    const redis = await spawnRedis(owned.dir);
    owned.redis = redis;
    const token = randomBytes(32).toString("hex");
    const bridge = await startBridge({
      redisPort: redis.port,
      token,
      ...(options.commandTimeoutMs === undefined ? {} : { commandTimeoutMs: options.commandTimeoutMs }),
      ...(options.log ? { log: options.log } : {}),
    });
    owned.bridge = bridge;
    const info = { index, url: bridge.url, token, redisPort: redis.port, bridgePort: bridge.port, pid: redis.pid };
    await waitForPing(info.url, token, 5_000);
    return Object.assign(owned, { redis, bridge, info });
  };

  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      await Promise.all(
        resources.map(async (node) => {
          await node.bridge?.close();
          await node.redis?.stop();
        }),
      );
      process.off("exit", killAllSync);
      guard.close();
      rmSync(dataDir, { recursive: true, force: true });
    })();
    return stopped;
  };

  let nodes: RunningNode[];
  try {
    nodes = await Promise.all(Array.from({ length: count }, (_, i) => startNode(i)));
  } catch (err) {
    await stop();
    throw err;
  }

  const node = (i: number): RunningNode => {
    const found = nodes[i];
    if (!found) throw new RangeError(`no node ${i} (cluster has ${nodes.length})`);
    return found;
  };

  return {
    nodes: nodes.map((n) => n.info),
    dataDir,
    async kill(i) {
      const { redis } = node(i);
      redis.signal("SIGKILL");
      await redis.exited;
    },
    pause: (i) => node(i).redis.signal("SIGSTOP"),
    resume: (i) => node(i).redis.signal("SIGCONT"),
    async restart(i) {
      const n = node(i);
      if (n.redis.isRunning()) {
        n.redis.signal("SIGKILL");
        await n.redis.exited;
      }
      n.redis = await spawnRedis(n.dir, n.info.redisPort);
      n.info.pid = n.redis.pid;
      // The bridge reconnects on its own (retry every ≤250 ms); wait until it has.
      await waitForPing(n.info.url, n.info.token, 5_000);
    },
    setDelay: (i, ms, phase) => node(i).bridge.setDelay(ms, phase),
    setJitter: (i, maxMs) => node(i).bridge.setJitter(maxMs),
    requestCounts: () => nodes.map((n) => n.bridge.requestCount()),
    commandCounts: () => nodes.map((n) => n.bridge.commandCounts()),
    pids: () => nodes.filter((n) => n.redis.isRunning()).map((n) => n.info.pid),
    stop,
  };
}

/** Polls `PING` through the bridge until it answers PONG. */
async function waitForPing(url: string, token: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
        body: '["PING"]',
        signal: AbortSignal.timeout(1_000),
      });
      const body = await res.text();
      if (res.ok && body === '{"result":"PONG"}') return;
      last = `${res.status} ${body}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(10);
  }
  throw new Error(`node ${url} did not answer PING within ${timeoutMs} ms (last: ${last})`);
}

/**
 * Removes data directories left by supervisors that died without cleaning up (SIGKILL with the
 * pdeathsig guard: the children die, but nobody is left to delete the folder). Best effort.
 */
function sweepStaleDirs(): void {
  try {
    for (const name of readdirSync(tmpdir())) {
      if (!name.startsWith(DIR_PREFIX)) continue;
      const dir = join(tmpdir(), name);
      try {
        const owner = Number(readFileSync(join(dir, OWNER_FILE), "utf8"));
        if (Number.isInteger(owner) && owner > 0 && !isProcessAlive(owner)) {
          rmSync(dir, { recursive: true, force: true });
        }
      } catch {
        // no owner file (being created right now, or not ours): leave it alone
      }
    }
  } catch {
    // tmpdir unreadable: nothing to sweep
  }
}
