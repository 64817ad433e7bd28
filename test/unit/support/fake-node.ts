/**
 * In-memory fake nodes for unit tests only: a tiny Redis (strings with TTL) that understands the
 * commands and scripts the library sends, with injectable latency and failures. Time comes from
 * Date.now(), which the tests fake with vi.useFakeTimers().
 */
import { ConfigurationError, NodeError } from "../../../src/errors.js";
import { acquireAllScript } from "../../../src/scripts/acquire-all.js";
import { extendScript } from "../../../src/scripts/extend.js";
import { gateScript } from "../../../src/scripts/gate.js";
import { gateReleaseScript } from "../../../src/scripts/gate-release.js";
import { inspectScript } from "../../../src/scripts/inspect.js";
import { releaseScript } from "../../../src/scripts/release.js";
import { verifyScript } from "../../../src/scripts/verify.js";
import type { RedisArgument, RedisNode, RedisReply } from "../../../src/transport.js";
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

const scripts = [
  acquireAllScript,
  extendScript,
  releaseScript,
  inspectScript,
  verifyScript,
  gateScript,
  gateReleaseScript,
];

export class FakeNode implements RedisNode {
  readonly store = new Map<string, { value: string; expiresAt: number }>();
  readonly log: RedisArgument[][] = [];
  /** Scripts the node has cached (EVALSHA works only for these). */
  readonly scriptCache = new Set<string>(scripts.map((s) => s.sha1));
  behaviour: Behaviour = { kind: "ok" };

  constructor(readonly id: string) {}

  get(key: string): string | undefined {
    const entry = this.store.get(key);
    if (!entry || entry.expiresAt <= Date.now()) return undefined;
    return entry.value;
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
    return new Promise((resolve, reject) => {
      const answer = () => {
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
        signal.addEventListener(
          "abort",
          () => {
            clearTimeout(timer);
            reject(signal.reason);
          },
          { once: true },
        );
      }
    });
  }

  private execute(args: readonly RedisArgument[]): RedisReply {
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
        const script = scripts.find((s) => (name.toUpperCase() === "EVAL" ? s.source === ref : s.sha1 === ref));
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
      case "verify": {
        if (keys.some((k) => this.get(k) !== token)) return -1;
        return Math.min(...keys.map((k) => (this.store.get(k) as { expiresAt: number }).expiresAt - Date.now()));
      }
      case "inspect": {
        const k = keys[0] as string;
        const entry = this.store.get(k);
        const value = this.get(k);
        return [value ?? null, value === undefined ? -2 : (entry as { expiresAt: number }).expiresAt - Date.now()];
      }
      default:
        throw new Error(`no script ${name}`);
    }
  }
}

/** `count` fake nodes named n0..n(count-1). */
export function fakeNodes(count: number): FakeNode[] {
  return Array.from({ length: count }, (_, i) => new FakeNode(`n${i}`));
}

/** A clock for the fake timers. */
export const fakeClock = { now: () => Date.now() };
