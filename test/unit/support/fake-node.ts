/**
 * In-memory fake nodes for unit tests only: the memory node's Redis (src/testing/redis.ts: strings
 * with TTL, hashes, every script of the library) with injectable latency and failures. Time comes
 * from Date.now(), which the tests fake with vi.useFakeTimers().
 *
 * Besides the behaviours below, a fake node can restart empty (`restart()`: data and script cache
 * lost), roll back to an older state (`snapshot()` / `restore()`: a failover that silently loses
 * recent writes), and delay each message separately (`latency`): a request applied after its delay
 * even when the client has given up, its reply delivered after a second delay.
 */
import { ConfigurationError, NodeError } from "../../../src/base/errors.js";
import { clusterScript } from "../../../src/core/scripts/cluster.js";
import type { GateStore } from "../../../src/testing/gate.js";
import { MemoryRedis, type StringEntry } from "../../../src/testing/redis.js";
import type { RedisArgument, RedisNode, RedisReply } from "../../../src/transport/rest.js";

export { libraryScripts } from "../../../src/testing/scripts.js";

export type Behaviour =
  /** Answers after `latencyMs`, plus a random extra delay up to `jitterMs` per request. */
  | { kind: "ok"; latencyMs?: number; jitterMs?: number }
  /** Rejects with a NodeError after `latencyMs`. */
  | { kind: "error"; latencyMs?: number }
  /** Never answers; only the abort ends it. */
  | { kind: "hang" }
  /** Ignores the abort: applies the command and answers after `latencyMs`, even past the deadline. */
  | { kind: "late"; latencyMs: number }
  /** Answers a reply of the wrong shape. */
  | { kind: "garbage"; latencyMs?: number }
  /** Rejects the token. */
  | { kind: "unauthorized" };

/** The fate of one message (see {@link FakeNode.latency}). */
export interface MessageDelay {
  readonly requestMs: number;
  readonly replyMs: number;
  /** The request is lost on the way: never applied, never answered. */
  readonly drop?: boolean;
}

/** A saved state of a FakeNode (see {@link FakeNode.snapshot}). */
export interface FakeNodeSnapshot {
  readonly store: Map<string, StringEntry>;
  readonly hashes: Map<string, Map<string, string>>;
}

/** Whether a request is the cluster check (see src/core/fingerprint.ts; sent by `EVAL`, or by `EVALSHA` by older versions). */
export function isClusterCheck(args: readonly RedisArgument[]): boolean {
  return args[1] === clusterScript.source || args[1] === clusterScript.sha1;
}

/** A clock for the fake timers. */
export const fakeClock = { now: () => Date.now() };

export class FakeNode extends MemoryRedis implements RedisNode {
  readonly log: RedisArgument[][] = [];
  behaviour: Behaviour = { kind: "ok" };
  /**
   * Per message, when set and the behaviour is `ok`: the request is applied after `requestMs`
   * (even if the client aborted meanwhile: a request in flight cannot be recalled) and the reply
   * delivered `replyMs` later.
   */
  latency: ((args: readonly RedisArgument[]) => MessageDelay) | undefined;
  /** Called right after the node has applied a command (or failed it), in the same tick. */
  onApplied: ((args: readonly RedisArgument[]) => void) | undefined;

  constructor(id: string) {
    super(id, fakeClock);
  }

  /** The log without the cluster check that a client's first acquisitions send alongside (see src/core/fingerprint.ts). */
  get lockLog(): RedisArgument[][] {
    return this.log.filter((c) => !isClusterCheck(c));
  }

  /** The store as the gate scripts see it. */
  get gateStore(): GateStore {
    return this;
  }

  /** A copy of the current data. */
  snapshot(): FakeNodeSnapshot {
    return {
      store: new Map([...this.store].map(([k, v]) => [k, { ...v }])),
      hashes: new Map([...this.hashes].map(([k, v]) => [k, new Map(v)])),
    };
  }

  /** Go back to an earlier snapshot: every later write is silently lost, the marker included if it was later. */
  restore(snapshot: FakeNodeSnapshot): void {
    this.store.clear();
    this.hashes.clear();
    for (const [k, v] of snapshot.store) this.store.set(k, { ...v });
    for (const [k, v] of snapshot.hashes) this.hashes.set(k, new Map(v));
  }

  /** Pre-occupy a key with a foreign token. */
  occupy(key: string, value = "foreign", ttlMs = 60_000): void {
    this.store.set(key, { value, expiresAt: Date.now() + ttlMs });
  }

  command(args: readonly RedisArgument[], signal: AbortSignal): Promise<RedisReply> {
    const behaviour = this.behaviour;
    this.log.push([...args]);
    if (behaviour.kind === "unauthorized") {
      return Promise.reject(new ConfigurationError(`node ${this.id} rejected the token (HTTP 401)`, { node: this.id }));
    }
    if (behaviour.kind === "ok" && this.latency) return this.delayed(args, signal, this.latency(args));
    return new Promise((resolve, reject) => {
      // Like a real transport, let go of the fan-out's signal once answered: a fan-out may send a
      // node several commands on one signal.
      let onAbort: (() => void) | undefined;
      const answer = () => {
        if (onAbort) signal.removeEventListener("abort", onAbort);
        try {
          if (behaviour.kind === "error") throw new NodeError(this.id, "connection refused");
          const reply = this.execute(args);
          resolve(behaviour.kind === "garbage" ? ("<html>oops</html>" as RedisReply) : reply);
        } catch (error) {
          reject(error);
        }
      };
      if (behaviour.kind === "hang") {
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        return;
      }
      const jitter = behaviour.kind === "ok" && behaviour.jitterMs ? Math.random() * behaviour.jitterMs : 0;
      const latency = ("latencyMs" in behaviour ? (behaviour.latencyMs ?? 0) : 0) + jitter;
      const timer = setTimeout(answer, latency);
      if (behaviour.kind !== "late") {
        onAbort = () => {
          clearTimeout(timer);
          reject(signal.reason);
        };
        signal.addEventListener("abort", onAbort, { once: true });
      }
    });
  }

  private delayed(args: readonly RedisArgument[], signal: AbortSignal, delay: MessageDelay): Promise<RedisReply> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const onAbort = () => settle(() => reject(signal.reason));
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener("abort", onAbort);
        fn();
      };
      signal.addEventListener("abort", onAbort, { once: true });
      if (delay.drop) return;
      setTimeout(() => {
        let outcome: () => void;
        try {
          const reply = this.execute(args);
          outcome = () => resolve(reply);
        } catch (error) {
          outcome = () => reject(error);
        }
        setTimeout(() => settle(outcome), delay.replyMs);
      }, delay.requestMs);
    });
  }

  /** Apply one command on the node's data, then tell {@link FakeNode.onApplied}. */
  override execute(args: readonly RedisArgument[]): RedisReply {
    try {
      return super.execute(args);
    } finally {
      this.onApplied?.(args);
    }
  }
}

/** `count` fake nodes named n0..n(count-1). */
export function fakeNodes(count: number): FakeNode[] {
  return Array.from({ length: count }, (_, i) => new FakeNode(`n${i}`));
}

/**
 * One isolate's view of `nodes` (the servers every isolate shares): each request waits
 * `oneWayMs(i)` on its way to node `i` and as long on its way back, on the (fake) timers, and
 * `observe`, when given, sees it as it leaves.
 */
export function isolateView(
  nodes: readonly FakeNode[],
  oneWayMs: (i: number) => number,
  observe?: (args: readonly RedisArgument[], i: number) => void,
): RedisNode[] {
  const after = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  return nodes.map((node, i) => ({
    id: node.id,
    async command(args: readonly RedisArgument[], signal: AbortSignal) {
      observe?.(args, i);
      await after(oneWayMs(i));
      const reply = await node.command(args, signal);
      await after(oneWayMs(i));
      return reply;
    },
  }));
}
