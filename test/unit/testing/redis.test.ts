/**
 * The memory node's Redis, command by command: the semantics the library relies on (and the
 * differential tests compare with a real redis-server), its errors (never echoing an argument),
 * and that it models every script the library has.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { NodeError, type RedisArgument } from "../../../src/index.js";
import { memoryNode } from "../../../src/testing/index.js";
import { libraryScripts } from "../../../src/testing/scripts.js";
import { sha1Hex } from "../../../src/testing/sha1.js";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../../src");

function node() {
  const memory = memoryNode({ id: "m" });
  const send = (...args: RedisArgument[]) => memory.command(args, new AbortController().signal);
  /** The Redis error text a command answers with. */
  const fails = async (...args: RedisArgument[]) => {
    const error = await send(...args).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(NodeError);
    return (error as NodeError).redisError;
  };
  return { memory, send, fails };
}

/** The names of the scripts (`: Script = Object.freeze({ name: "…"`) defined in `text`. */
function scriptNames(text: string): string[] {
  return [
    ...text.matchAll(/:\s*Script\s*=\s*(?:\/\*\s*@__PURE__\s*\*\/\s*)?Object\.freeze\(\{\s*name:\s*"([^"]+)"/g),
  ].map((m) => m[1] as string);
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

describe("the scripts a memory node runs", () => {
  it("are every script defined in src/, so a new script cannot go without a model", () => {
    const defined = sources(SRC).flatMap((file) => scriptNames(readFileSync(file, "utf8")));
    expect(defined.length).toBeGreaterThanOrEqual(16);
    expect(libraryScripts.map((s) => s.name).sort()).toEqual(defined.sort());
  });

  it("negative control: the scan finds a script definition", () => {
    expect(scriptNames('export const x: Script = Object.freeze({\n  name: "new-one",\n  source: ""')).toEqual([
      "new-one",
    ]);
    // A script a bundler may drop when unused is marked pure: it is found all the same.
    expect(scriptNames('const y: Script = /* @__PURE__ */ Object.freeze({ name: "pure-one"')).toEqual(["pure-one"]);
  });

  it("answers NOSCRIPT after a restart until EVAL has run a script again", async () => {
    const { memory, send, fails } = node();
    const release = libraryScripts.find((s) => s.name === "release");
    if (!release) throw new Error("no release script");
    memory.restart();
    expect(await fails("EVALSHA", release.sha1, 1, "k", "t")).toMatch(/^NOSCRIPT/);
    expect(await send("EVAL", release.source, 1, "k", "t")).toBe(0);
    expect(await send("EVALSHA", release.sha1, 1, "k", "t")).toBe(0);
  });

  it("refuses a script of its own by SHA, never echoing the script's arguments", async () => {
    const { fails } = node();
    const source = "return redis.call('GET', KEYS[1])";
    const secret = "tok-3f9a7c0d2b4e";
    expect(await fails("EVALSHA", sha1Hex(source), 1, secret)).toMatch(/^NOSCRIPT/);
    const text = await fails("EVAL", source, 1, secret, secret);
    expect(text).toContain(createHash("sha1").update(source).digest("hex"));
    expect(text).not.toContain(secret);
    expect(await fails(secret, "x")).toBe("ERR unknown command");
    expect(await fails("FLUSHALL", secret)).toBe("ERR unknown command 'FLUSHALL'");
  });
});

describe("commands", () => {
  it("SET: NX and XX, PX and EX, KEEPTTL, and Redis's errors for a bad form", async () => {
    const { memory, send, fails } = node();
    expect(await send("SET", "k", "a", "NX", "PX", 5000)).toBe("OK");
    expect(await send("SET", "k", "b", "NX", "PX", 5000)).toBeNull();
    expect(await send("SET", "missing", "b", "XX")).toBeNull();
    expect(await send("SET", "k", "c", "XX", "KEEPTTL")).toBe("OK");
    expect([memory.get("k"), memory.pttl("k") > 4000]).toEqual(["c", true]);
    expect(await send("SET", "k", "d", "EX", 100)).toBe("OK");
    expect(memory.pttl("k")).toBeGreaterThan(99_000);
    expect(await send("SET", "k", "e")).toBe("OK");
    expect(memory.pttl("k")).toBe(-1);
    expect(await fails("SET", "k", "v", "PX", 0)).toBe("ERR invalid expire time in 'set' command");
    expect(await fails("SET", "k", "v", "PX", "soon")).toBe("ERR value is not an integer or out of range");
    expect(await fails("SET", "k", "v", "NX", "XX")).toBe("ERR syntax error");
    expect(await fails("SET", "k")).toBe("ERR wrong number of arguments for 'set' command");
  });

  it("one keyspace: WRONGTYPE across strings and hashes, SET replaces a hash, DEL and EXISTS count either", async () => {
    const { memory, send, fails } = node();
    expect(await send("HSET", "h", "f", "1", "g", "2")).toBe(2);
    expect(await send("HGET", "h", "g")).toBe("2");
    expect(await fails("GET", "h")).toMatch(/^WRONGTYPE/);
    await send("SET", "s", "v");
    expect(await fails("HGET", "s", "f")).toMatch(/^WRONGTYPE/);
    expect(await send("EXISTS", "h", "s", "none")).toBe(2);
    expect(memory.keys()).toEqual(["h", "s"]);
    expect(await send("SET", "h", "now a string")).toBe("OK");
    expect(await send("GET", "h")).toBe("now a string");
    expect(await send("DEL", "h", "s", "none")).toBe(2);
    expect(memory.keys()).toEqual([]);
  });

  it("PEXPIRE sets a TTL on a live key, and deletes it at 0; INCR keeps the TTL", async () => {
    const { memory, send } = node();
    expect(await send("PEXPIRE", "k", 1000)).toBe(0);
    await send("SET", "k", "5", "PX", 60_000);
    expect(await send("PEXPIRE", "k", 1000)).toBe(1);
    expect(await send("PTTL", "k")).toBeLessThanOrEqual(1000);
    expect(await send("INCR", "k")).toBe(6);
    expect(memory.pttl("k")).toBeLessThanOrEqual(1000);
    expect(await send("PEXPIRE", "k", 0)).toBe(1);
    expect(await send("PTTL", "k")).toBe(-2);
    expect(await send("PING")).toBe("PONG");
  });

  it("TIME: whole seconds and the microseconds within, as strings, on the node's clock; CONFIG and INFO are unknown", async () => {
    let now = 1_700_000_123_456.789;
    const memory = memoryNode({ clock: { now: () => now } });
    const send = (...args: RedisArgument[]) => memory.command(args, new AbortController().signal);
    expect(await send("TIME")).toEqual(["1700000123", "456789"]);
    now = 1_700_000_124_000;
    expect(await send("time")).toEqual(["1700000124", "0"]);
    const { fails } = node();
    expect(await fails("CONFIG", "GET", "maxmemory-policy")).toBe("ERR unknown command 'CONFIG'");
    expect(await fails("INFO")).toBe("ERR unknown command 'INFO'");
  });

  it("answers with errors shaped as a REST node's: status 400 and the Redis text", async () => {
    const { send } = node();
    const error = await send("GET").catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: "NODE_ERROR",
      node: "m",
      status: 400,
      redisError: "ERR wrong number of arguments for 'get' command",
      message: "m answered with an error (HTTP 400): ERR wrong number of arguments for 'get' command",
    });
  });
});

describe("sha1Hex", () => {
  it("matches node:crypto across block boundaries and multi-byte text", () => {
    for (const text of ["", "abc", "a".repeat(55), "a".repeat(56), "a".repeat(64), "é€😀".repeat(40)]) {
      expect(sha1Hex(text)).toBe(createHash("sha1").update(text).digest("hex"));
    }
  });
});
