/**
 * In-memory fake nodes for unit tests only: a tiny Redis (strings with TTL) that understands the
 * commands and scripts the library sends, with injectable latency and failures. Time comes from
 * Date.now(), which the tests fake with vi.useFakeTimers().
 *
 * For fencing it also keeps hashes, runs the fencing scripts (test/unit/support/fake-fencing.ts),
 * can restart empty (`restart()`: data and script cache lost), roll back to an older state
 * (`snapshot()` / `restore()`: a failover that silently loses recent writes), and can delay each
 * message separately (`latency`): a request applied after its delay even when the client has
 * given up, its reply delivered after a second delay.
 */
import { ConfigurationError, NodeError } from "../../../src/base/errors.js";
import { acquireAllScript } from "../../../src/core/scripts/acquire-all.js";
import { clusterScript } from "../../../src/core/scripts/cluster.js";
import { extendScript } from "../../../src/core/scripts/extend.js";
import { inspectScript } from "../../../src/core/scripts/inspect.js";
import { releaseScript } from "../../../src/core/scripts/release.js";
import { verifyScript } from "../../../src/core/scripts/verify.js";
import { fencedWriteScript } from "../../../src/fencing/guard.js";
import { fenceAcquireScript } from "../../../src/fencing/scripts/fence-acquire.js";
import { fenceInitScript } from "../../../src/fencing/scripts/fence-init.js";
import { fenceQuarantineScript } from "../../../src/fencing/scripts/fence-quarantine.js";
import { fenceRatchetScript } from "../../../src/fencing/scripts/fence-ratchet.js";
import { fenceReadScript } from "../../../src/fencing/scripts/fence-read.js";
import { fenceRepairScript } from "../../../src/fencing/scripts/fence-repair.js";
import type { RedisArgument, RedisNode, RedisReply } from "../../../src/transport/rest.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";
import { gateReleaseScript } from "../../../src/waiting/scripts/gate-release.js";
import { handOverScript } from "../../../src/waiting/scripts/hand-over.js";
import { type FakeStore, runFenceScript } from "./fake-fencing.js";
import { type GateStore, runGate, runGateRelease } from "./fake-gate.js";

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

/** Every Lua script of the library (and the fenced-write guard): what the fake nodes understand. */
export const libraryScripts = [
  acquireAllScript,
  extendScript,
  releaseScript,
  inspectScript,
  verifyScript,
  gateScript,
  gateReleaseScript,
  handOverScript,
  fenceAcquireScript,
  fenceRatchetScript,
  fenceReadScript,
  fenceRepairScript,
  fenceQuarantineScript,
  fenceInitScript,
  fencedWriteScript,
  clusterScript,
];

/** The fate of one message (see {@link FakeNode.latency}). */
export interface MessageDelay {
  readonly requestMs: number;
  readonly replyMs: number;
  /** The request is lost on the way: never applied, never answered. */
  readonly drop?: boolean;
}

/** A saved state of a FakeNode (see {@link FakeNode.snapshot}). */
export interface FakeNodeSnapshot {
  readonly store: Map<string, { value: string; expiresAt: number }>;
  readonly hashes: Map<string, Map<string, string>>;
}

export class FakeNode implements RedisNode {
  readonly store = new Map<string, { value: string; expiresAt: number }>();
  /** Hash keys (no TTL). */
  readonly hashes = new Map<string, Map<string, string>>();
  readonly log: RedisArgument[][] = [];
  /** Scripts the node has cached (EVALSHA works only for these). */
  readonly scriptCache = new Set<string>(libraryScripts.map((s) => s.sha1));
  behaviour: Behaviour = { kind: "ok" };
  /**
   * Per message, when set and the behaviour is `ok`: the request is applied after `requestMs`
   * (even if the client aborted meanwhile: a request in flight cannot be recalled) and the reply
   * delivered `replyMs` later.
   */
  latency: ((args: readonly RedisArgument[]) => MessageDelay) | undefined;
  /** Called right after the node has applied a command (or failed it), in the same tick. */
  onApplied: ((args: readonly RedisArgument[]) => void) | undefined;

  constructor(readonly id: string) {}

  /** The log without the cluster check that a client's first acquisitions send alongside (see src/cluster.ts). */
  get lockLog(): RedisArgument[][] {
    return this.log.filter((c) => !(c[1] === clusterScript.sha1 || c[1] === clusterScript.source));
  }

  get(key: string): string | undefined {
    if (this.hashes.has(key)) throw wrongType(this.id);
    return this.liveString(key);
  }

  private liveString(key: string): string | undefined {
    const entry = this.store.get(key);
    if (!entry || entry.expiresAt <= Date.now()) return undefined;
    return entry.value;
  }

  /** Lose everything, as a redis-server restarted without persistence (script cache included). */
  restart(): void {
    this.store.clear();
    this.hashes.clear();
    this.scriptCache.clear();
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

  /** A hash field, or undefined. */
  hget(key: string, field: string): string | undefined {
    if (this.liveString(key) !== undefined) throw wrongType(this.id);
    return this.hashes.get(key)?.get(field);
  }

  private readonly fenceStore: FakeStore = {
    getString: (key) => this.get(key),
    setString: (key, value, ttlMs) => {
      if (this.hashes.has(key)) throw wrongType(this.id);
      this.store.set(key, { value, expiresAt: ttlMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + ttlMs });
    },
    exists: (key) => this.hashes.has(key) || this.get(key) !== undefined,
    hget: (key, field) => this.hget(key, field),
    hset: (key, field, value) => {
      if (this.liveString(key) !== undefined) throw wrongType(this.id);
      const hash = this.hashes.get(key) ?? new Map<string, string>();
      this.hashes.set(key, hash);
      hash.set(field, value);
    },
  };

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

  private execute(args: readonly RedisArgument[]): RedisReply {
    try {
      return this.apply(args);
    } finally {
      this.onApplied?.(args);
    }
  }

  private apply(args: readonly RedisArgument[]): RedisReply {
    const [name, ...rest] = args.map(String);
    switch (name?.toUpperCase()) {
      case "SET": {
        const [key, value, nx, px, ttl] = rest as [string, string, string, string, string];
        if (nx !== "NX" || px !== "PX") throw new NodeError(this.id, "unsupported SET form");
        if (this.get(key) !== undefined) return null;
        this.store.set(key, { value, expiresAt: Date.now() + Number(ttl) });
        return "OK";
      }
      case "EVALSHA":
      case "EVAL": {
        const [ref, count, ...tail] = rest as [string, string, ...string[]];
        const script = libraryScripts.find((s) => (name.toUpperCase() === "EVAL" ? s.source === ref : s.sha1 === ref));
        if (!script) throw new NodeError(this.id, "unknown script", { redisError: "ERR unknown script" });
        if (name.toUpperCase() === "EVALSHA" && !this.scriptCache.has(script.sha1)) {
          throw new NodeError(this.id, "NOSCRIPT", {
            status: 400,
            redisError: "NOSCRIPT No matching script. Please use EVAL.",
          });
        }
        this.scriptCache.add(script.sha1);
        const keys = tail.slice(0, Number(count));
        const argv = tail.slice(Number(count));
        return this.runScript(script.name, keys, argv);
      }
      case "INCR": {
        const key = rest[0] as string;
        const value = Number(this.get(key) ?? "0") + 1;
        this.store.set(key, { value: String(value), expiresAt: Number.POSITIVE_INFINITY });
        return value;
      }
      case "GET":
        return this.get(rest[0] as string) ?? null;
      case "HGET":
        return this.hget(rest[0] as string, rest[1] as string) ?? null;
      default:
        throw new NodeError(this.id, `unsupported command ${name}`, { redisError: `ERR unknown command '${name}'` });
    }
  }

  /** The store as the gate scripts see it. */
  readonly gateStore: GateStore = {
    get: (key) => this.get(key),
    pttl: (key) => {
      const entry = this.store.get(key);
      return entry && entry.expiresAt > Date.now() ? entry.expiresAt - Date.now() : -2;
    },
    set: (key, value, ttlMs) => {
      this.store.set(key, { value, expiresAt: Date.now() + ttlMs });
    },
    del: (key) => (this.store.delete(key) ? 1 : 0),
    now: () => Date.now(),
  };

  private runScript(name: string, keys: string[], argv: string[]): RedisReply {
    const [token, ttl] = argv as [string, string];
    switch (name) {
      case "gate":
        return runGate(this.gateStore, keys, argv);
      case "gate-release":
        return runGateRelease(this.gateStore, keys, argv);
      case "acquire-all":
        if (keys.some((k) => this.get(k) !== undefined)) return 0;
        for (const k of keys) this.store.set(k, { value: token, expiresAt: Date.now() + Number(ttl) });
        return 1;
      case "extend":
        if (keys.some((k) => this.get(k) !== token)) return 0;
        for (const k of keys) this.store.set(k, { value: token, expiresAt: Date.now() + Number(ttl) });
        return 1;
      case "release": {
        let deleted = 0;
        for (const k of keys) {
          if (this.get(k) === token) {
            this.store.delete(k);
            deleted++;
          }
        }
        return deleted;
      }
      case "hand-over": {
        let deleted = 0;
        for (const k of keys) {
          if (this.get(k) === token) {
            this.store.delete(k);
            deleted++;
          }
        }
        if (keys.some((k) => this.get(k) !== undefined)) return [deleted, 0];
        for (const k of keys) this.store.set(k, { value: argv[1] as string, expiresAt: Date.now() + Number(argv[2]) });
        return [deleted, 1];
      }
      case "verify": {
        if (keys.some((k) => this.get(k) !== token)) return -1;
        return Math.min(...keys.map((k) => (this.store.get(k) as { expiresAt: number }).expiresAt - Date.now()));
      }
      case "cluster": {
        // The fingerprint key has no TTL; `check` keeps the first fingerprint, `reset` replaces it.
        const k = keys[0] as string;
        if (argv[1] === "reset" || this.get(k) === undefined) this.store.set(k, { value: token, expiresAt: Infinity });
        return this.get(k) as string;
      }
      case "inspect": {
        const k = keys[0] as string;
        const entry = this.store.get(k);
        const value = this.get(k);
        return [value ?? null, value === undefined ? -2 : (entry as { expiresAt: number }).expiresAt - Date.now()];
      }
      default: {
        let reply: unknown;
        try {
          reply = runFenceScript(this.fenceStore, name, keys, argv);
        } catch (error) {
          if (error instanceof NodeError) throw error;
          const message = (error as Error).message;
          throw new NodeError(this.id, `${this.id} answered with an error: ${message}`, {
            status: 400,
            redisError: message,
          });
        }
        if (reply === undefined) throw new Error(`no script ${name}`);
        return reply as RedisReply;
      }
    }
  }
}

function wrongType(id: string): NodeError {
  const message = "WRONGTYPE Operation against a key holding the wrong kind of value";
  return new NodeError(id, `${id} answered with an error: ${message}`, { status: 400, redisError: message });
}

/** `count` fake nodes named n0..n(count-1). */
export function fakeNodes(count: number): FakeNode[] {
  return Array.from({ length: count }, (_, i) => new FakeNode(`n${i}`));
}

/** A clock for the fake timers. */
export const fakeClock = { now: () => Date.now() };
