/**
 * The memory node: a {@link RedisNode} that keeps its data in memory, for users' own tests.
 * @module
 */
import { InvalidArgumentError, NodeError } from "../base/errors.js";
import type { RedisArgument, RedisNode, RedisReply } from "../transport/rest.js";
import { MemoryRedis } from "./redis.js";

/** Options of {@link memoryNode}. */
export interface MemoryNodeOptions {
  /**
   * The node's id, as outcomes, reports and errors name it. Ids make the cluster's fingerprint
   * (see `clusterName`), so clients meant to share a lock must be given the same node objects.
   * @default "memory-1", "memory-2", … (a counter per loaded copy of this module)
   */
  readonly id?: string;
  /**
   * The node's clock, in epoch milliseconds: TTLs count on it. Read at every command, so
   * `vi.useFakeTimers()` (or `jest.useFakeTimers()`) moves it, and expiry follows fake time.
   * @default { now: () => Date.now() }
   */
  readonly clock?: {
    /** The time, in epoch milliseconds. */
    now(): number;
  };
  /**
   * How long each command takes, in ms: it is applied and answered that long after it was sent
   * (a `setTimeout`, so under fake timers the test must advance time). An abort before then
   * cancels it unapplied. At 0 the command is applied and answered in a microtask: no timer
   * involved.
   * @default 0
   */
  readonly latencyMs?: number;
}

/**
 * An in-memory Redis node: give `new Redlock({ nodes })` several of them and the library runs as
 * against real nodes, every command and script it sends included (waiting in line, fencing), with
 * no network. Strings and hashes with TTLs on the node's own clock; `down()`, `up()` and
 * `restart()` stage outages; `get`, `pttl` and `keys` look inside.
 */
export interface MemoryNode extends RedisNode {
  readonly id: string;
  /**
   * Take the node down, as a stopped server: until {@link MemoryNode.up}, every command (those
   * in flight included) fails with a `NodeError`, as a refused connection does. Data is kept.
   */
  down(): void;
  /** Bring the node back up, with the data it had. */
  up(): void;
  /** Whether the node is down. */
  readonly isDown: boolean;
  /**
   * Lose every key, as a redis-server restarted without persistence. Its script cache empties too,
   * so the next script runs after a `NOSCRIPT` answer and the library's `EVAL` fallback.
   */
  restart(): void;
  /** A string key's value, or `undefined` when it is missing, expired or not a string. */
  get(key: string): string | undefined;
  /** A key's remaining TTL in ms, as `PTTL` answers: -2 when it is missing, -1 when it has none. */
  pttl(key: string): number;
  /**
   * Every live key, sorted. Besides lock keys, the library keeps a cluster fingerprint on each
   * node (`__edge-redlock__:cluster:…`, no TTL) and, with fencing, its counters.
   */
  keys(): string[];
}

let created = 0;

/**
 * Create an in-memory node for tests.
 *
 * ```ts
 * import { Redlock } from "edge-redlock";
 * import { memoryNode } from "edge-redlock/testing";
 *
 * const nodes = [memoryNode(), memoryNode(), memoryNode()];
 * const redlock = new Redlock({ nodes });
 * ```
 *
 * It answers `SET`, `GET`, `PTTL`, `PEXPIRE`, `DEL`, `EXISTS`, `INCR`, `HGET`, `HSET`, `ZADD`,
 * `ZRANGE`, `ZSCORE`, `ZCARD`, `PING`, `TIME` (on its clock), and `EVAL`/`EVALSHA` of edge-redlock's own scripts (the fenced-write guard
 * of `edge-redlock/fencing` included), which a test keeps identical to the Lua on a real
 * redis-server. Any other script is refused with a `NodeError` naming its SHA-1, and any other
 * command (`CONFIG`, `INFO`, …) with Redis's `ERR unknown command`.
 * @throws {InvalidArgumentError} for an empty id, a clock without `now()`, or a negative or non-finite latency.
 */
export function memoryNode(options: MemoryNodeOptions = {}): MemoryNode {
  const { id = `memory-${++created}`, clock = { now: () => Date.now() }, latencyMs = 0 } = options;
  if (typeof id !== "string" || id.length === 0)
    throw new InvalidArgumentError("memoryNode: id must be a non-empty string");
  if (typeof clock?.now !== "function") throw new InvalidArgumentError("memoryNode: clock must have a now() method");
  if (typeof latencyMs !== "number" || !Number.isFinite(latencyMs) || latencyMs < 0) {
    throw new InvalidArgumentError("memoryNode: latencyMs must be a finite number of milliseconds, 0 or more");
  }
  const redis = new MemoryRedis(id, clock);
  let isDown = false;
  const refused = () => new NodeError(id, `request to ${id} failed: connection refused (the memory node is down)`);

  return {
    id,
    get isDown() {
      return isDown;
    },
    down() {
      isDown = true;
    },
    up() {
      isDown = false;
    },
    restart() {
      redis.restart();
    },
    get(key) {
      return redis.hashes.has(key) || redis.zsets.has(key) ? undefined : redis.get(key);
    },
    pttl(key) {
      return redis.pttl(key);
    },
    keys() {
      return redis.keys();
    },
    command(args: readonly RedisArgument[], signal: AbortSignal): Promise<RedisReply> {
      return new Promise((resolve, reject) => {
        if (signal.aborted) {
          reject(signal.reason);
          return;
        }
        let timer: ReturnType<typeof setTimeout> | undefined;
        const onAbort = () => {
          clearTimeout(timer);
          reject(signal.reason);
        };
        const answer = () => {
          signal.removeEventListener("abort", onAbort);
          // An abort that came first already settled the promise: the command never reached the node.
          if (signal.aborted) return;
          if (isDown) return reject(refused());
          try {
            resolve(redis.execute(args));
          } catch (error) {
            reject(error);
          }
        };
        signal.addEventListener("abort", onAbort, { once: true });
        if (latencyMs > 0) timer = setTimeout(answer, latencyMs);
        else queueMicrotask(answer);
      });
    },
  };
}

/**
 * `count` memory nodes with the same options (ids from the counter): a cluster in one call.
 * @throws {InvalidArgumentError} for a count that is not a positive integer, or bad options (see {@link memoryNode}).
 */
export function memoryNodes(count: number, options: Omit<MemoryNodeOptions, "id"> = {}): MemoryNode[] {
  if (!Number.isInteger(count) || count < 1)
    throw new InvalidArgumentError("memoryNodes: count must be a positive integer");
  return Array.from({ length: count }, () => memoryNode(options));
}
