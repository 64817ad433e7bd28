/**
 * Instant in-memory nodes for the client-CPU part only (everything else runs on real
 * redis-servers): a tiny Redis (strings with a PX expiry) and the three shapes clients expect,
 * an edge-redlock {@link RedisNode}, a `fetch` speaking the Upstash REST protocol, and an
 * ioredis-shaped object for the TCP peers. Scripts are recognised, never interpreted: an
 * edge-redlock script (the scripts/ folders of src/) without an implementation here fails loudly, so a new
 * library script gets added here rather than silently measured wrong.
 */
import { createHash } from "node:crypto";
import type { RedisArgument, RedisNode, RedisReply } from "../../src/index.js";
import { libraryScripts } from "./scripts.js";

type Arg = string | number;
type ScriptRun = (store: MemoryStore, keys: string[], argv: string[]) => RedisReply;

const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");

/** edge-redlock's scripts, by their `name` in the scripts/ folders of src/. */
const LIBRARY_SCRIPTS: Record<string, ScriptRun> = {
  "acquire-all": (s, keys, [token, ttl]) => {
    if (keys.some((k) => s.get(k) !== undefined)) return 0;
    for (const k of keys) s.set(k, token as string, Number(ttl));
    return 1;
  },
  extend: (s, keys, [token, ttl]) => {
    if (keys.some((k) => s.get(k) !== token)) return 0;
    for (const k of keys) s.set(k, token as string, Number(ttl));
    return 1;
  },
  release: (s, keys, [token]) => {
    let deleted = 0;
    for (const k of keys) if (s.get(k) === token && s.delete(k)) deleted++;
    return deleted;
  },
  // The release on a resource's gate node; the CPU part never waits, so no one is in line and
  // nothing is handed over.
  "gate-release": (s, keys, [token, count, _ttl]) => {
    let deleted = 0;
    for (const k of keys.slice(0, Number(count))) if (s.get(k) === token && s.delete(k)) deleted++;
    return [deleted, 0, 0, 0, 0, 0, 0, 0, 0, 0];
  },
  "hand-over": (s, keys, [token, next, ttl]) => {
    let deleted = 0;
    for (const k of keys) if (s.get(k) === token && s.delete(k)) deleted++;
    if (keys.some((k) => s.get(k) !== undefined)) return [deleted, 0];
    for (const k of keys) s.set(k, next as string, Number(ttl));
    return [deleted, 1];
  },
  inspect: (s, [key]) => [s.get(key as string) ?? null, s.pttl(key as string)],
  // The cluster check (src/core/cluster.ts): keep the first fingerprint (no TTL), answer the one kept.
  cluster: (s, [key], [fingerprint, mode]) => {
    if (mode === "reset" || s.get(key as string) === undefined) {
      s.set(key as string, fingerprint as string, Number.POSITIVE_INFINITY);
    }
    return s.get(key as string) ?? null;
  },
  verify: (s, keys, [token]) => {
    if (keys.some((k) => s.get(k) !== token)) return -1;
    return Math.min(...keys.map((k) => s.pttl(k)));
  },
};

/** Peers' compare-and-delete scripts (GET KEYS[1] == ARGV[1] then DEL), recognised by their text. */
function isCompareAndDelete(source: string): boolean {
  return (
    /get["']?,\s*KEYS\[1\]\)\s*==\s*ARGV\[1\]/i.test(source) && /["']del["']/i.test(source) && !/expire/i.test(source)
  );
}

const compareAndDelete: ScriptRun = (s, [key], [token]) =>
  s.get(key as string) === token && s.delete(key as string) ? 1 : 0;

/** One in-memory Redis: string keys with a millisecond expiry, and the scripts it knows. */
export class MemoryStore {
  private readonly data = new Map<string, { value: string; expiresAt: number }>();
  private readonly scripts = new Map<string, { name: string; run?: ScriptRun }>();

  private constructor(known: { name: string; sha1: string; source: string }[]) {
    for (const script of known) this.scripts.set(script.sha1, { name: script.name, run: LIBRARY_SCRIPTS[script.name] });
  }

  /**
   * A store that knows edge-redlock's scripts as of the scripts/ folders of src/ (or of `srcDir`,
   * another revision's src/ folder ending in a slash).
   */
  static async create(srcDir?: string): Promise<MemoryStore> {
    return new MemoryStore(await libraryScripts(srcDir));
  }

  get(key: string): string | undefined {
    const entry = this.data.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.data.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: string, ttlMs: number): void {
    this.data.set(key, { value, expiresAt: Date.now() + ttlMs });
  }

  delete(key: string): boolean {
    return this.get(key) !== undefined && this.data.delete(key);
  }

  pttl(key: string): number {
    const entry = this.data.get(key);
    return this.get(key) === undefined ? -2 : (entry as { expiresAt: number }).expiresAt - Date.now();
  }

  /** Registers a script's source (SCRIPT LOAD / EVAL) and returns its SHA-1. */
  load(source: string): string {
    const sha = sha1(source);
    if (!this.scripts.has(sha)) {
      this.scripts.set(
        sha,
        isCompareAndDelete(source) ? { name: "compare-and-delete", run: compareAndDelete } : { name: "unknown" },
      );
    }
    return sha;
  }

  /** Runs one command. Throws an Error whose message is the Redis error text. */
  execute(args: readonly Arg[]): RedisReply {
    const [name, ...rest] = args.map(String);
    switch (name?.toUpperCase()) {
      case "SET": {
        const [key, value, ...flags] = rest as [string, string, ...string[]];
        const upper = flags.map((f) => f.toUpperCase());
        const px = upper.indexOf("PX");
        if (upper.includes("NX") && this.get(key) !== undefined) return null;
        this.set(key, value, px >= 0 ? Number(flags[px + 1]) : Number.POSITIVE_INFINITY);
        return "OK";
      }
      case "GET":
        return this.get(rest[0] as string) ?? null;
      case "DEL":
        return rest.filter((k) => this.delete(k)).length;
      case "SCRIPT":
        if (rest[0]?.toUpperCase() !== "LOAD") break;
        return this.load(rest[1] as string);
      case "EVAL":
        return this.evalsha(this.load(rest[0] as string), rest.slice(1));
      case "EVALSHA":
        return this.evalsha(rest[0] as string, rest.slice(1));
    }
    throw new Error(`ERR in-memory node: unsupported command ${name}`);
  }

  private evalsha(sha: string, rest: string[]): RedisReply {
    const script = this.scripts.get(sha);
    if (!script) throw new Error("NOSCRIPT No matching script. Please use EVAL.");
    if (!script.run) {
      throw new Error(
        `ERR in-memory node: no implementation of script "${script.name}" (${sha}); add it to tools/bench/memory-store.ts`,
      );
    }
    const count = Number(rest[0]);
    return script.run(this, rest.slice(1, 1 + count), rest.slice(1 + count));
  }
}

/** An edge-redlock node answering from `store` at once. */
export function memoryRedisNode(store: MemoryStore, id: string): RedisNode {
  return {
    id,
    async command(args: readonly RedisArgument[]) {
      return store.execute(args);
    },
  };
}

/**
 * A `fetch` that answers the Upstash REST protocol (`/` and `/pipeline`, base64 results on
 * request) from the store of the URL's host (`http://memory-0/` → stores[0]). Any other URL goes
 * to `fallback`.
 */
export function memoryFetch(stores: readonly MemoryStore[], fallback: typeof fetch): typeof fetch {
  const encode = (reply: RedisReply, base64: boolean): RedisReply => {
    if (!base64) return reply;
    if (typeof reply === "string") return Buffer.from(reply).toString("base64");
    if (Array.isArray(reply)) return reply.map((r) => encode(r, true));
    return reply;
  };
  const answer = (store: MemoryStore, command: Arg[], base64: boolean) => {
    try {
      return { result: encode(store.execute(command), base64) };
    } catch (error) {
      return { error: (error as Error).message };
    }
  };
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const match = /^memory-(\d+)$/.exec(url.hostname);
    const store = match ? stores[Number(match[1])] : undefined;
    if (!store) return fallback(input, init);
    const headers = new Headers(init?.headers);
    const base64 = headers.get("upstash-encoding")?.toLowerCase() === "base64";
    const body = JSON.parse(String(init?.body)) as Arg[] | Arg[][];
    const json =
      url.pathname === "/pipeline"
        ? (body as Arg[][]).map((command) => answer(store, command, base64))
        : answer(store, body as Arg[], base64);
    const status = !Array.isArray(json) && "error" in json ? 400 : 200;
    return new Response(JSON.stringify(json), { status, headers: { "content-type": "application/json" } });
  }) as typeof fetch;
}

/** Lua bodies of the sesamecare peer's commands, by the names it defines them under. */
const DEFINED_COMMANDS: Record<string, (s: MemoryStore, keys: string[], argv: string[]) => number> = {
  // ARGV: db, value, duration
  acquireLock: (s, keys, [, value, ttl]) => {
    if (keys.some((k) => s.get(k) !== undefined)) return 0;
    for (const k of keys) s.set(k, value as string, Number(ttl));
    return keys.length;
  },
  extendLock: (s, keys, [, value, ttl]) => {
    if (keys.some((k) => s.get(k) !== value)) return 0;
    for (const k of keys) s.set(k, value as string, Number(ttl));
    return keys.length;
  },
  releaseLock: (s, keys, [, value]) => keys.filter((k) => s.get(k) === value && s.delete(k)).length,
};

/**
 * The part of the ioredis client API the TCP peers call (set, get, del, script, evalsha,
 * defineCommand, quit), answering from `store` at once. It leaves ioredis itself out: the CPU
 * figure for TCP peers is the lock library's own work.
 */
export function memoryIoredis(store: MemoryStore): Record<string, unknown> {
  const run = async (...args: Arg[]) => store.execute(args);
  const client: Record<string, unknown> = {
    status: "ready",
    set: (...args: Arg[]) => run("SET", ...args),
    get: (key: string) => run("GET", key),
    del: (...keys: string[]) => run("DEL", ...keys),
    script: (...args: Arg[]) => run("SCRIPT", ...args),
    evalsha: (...args: Arg[]) => run("EVALSHA", ...args),
    eval: (...args: Arg[]) => run("EVAL", ...args),
    quit: async () => "OK",
    disconnect: () => {},
    defineCommand(name: string) {
      const implementation = DEFINED_COMMANDS[name];
      if (!implementation) throw new Error(`in-memory ioredis: no implementation of defined command ${name}`);
      client[name] = async (count: number, ...rest: Arg[]) => {
        const strings = rest.map(String);
        return implementation(store, strings.slice(0, count), strings.slice(count));
      };
    },
  };
  return client;
}
