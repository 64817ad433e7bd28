/**
 * Conformance of the REST bridge with the unmodified `@upstash/redis` client.
 *
 * Every result the client returns is compared with what `redis-cli` returns for the same command
 * on the same redis-server: the bridge must be transparent.
 *
 * Comparing like with like: `@upstash/redis` runs JSON.parse over every result by default
 * (automaticDeserialization), so "123" would come back as the number 123 while redis-cli prints
 * "123". All string values used here ("v-1", "hello-x", SHA-1 digests, "OK") are not valid JSON
 * text, so the client leaves them as strings and the raw redis-cli value can be compared as is.
 *
 * Read commands run in both tools on the same key. Write commands run on twin keys prepared in
 * the same state (`sdk:` for the client, `cli:` for redis-cli), since running them twice on one
 * key would change the answer (SET NX: "OK" then null).
 *
 * This file uses its own single node (started with the supervisor API) because it flushes the
 * script cache, which would disturb other tests on the shared nodes.
 */
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NodeCluster, startNodes } from "../../tools/nodes/index.js";
import { redisCli, redisCliError, redisCliResult } from "./redis-cli.js";

let cluster: NodeCluster;
let port: number;

beforeAll(async () => {
  cluster = await startNodes({ count: 1 });
  port = cluster.nodes[0]?.redisPort as number;
});

afterAll(async () => {
  await cluster?.stop();
});

const configs = [
  {
    name: "default config (auto-pipelining, base64)",
    tag: "default",
    options: {},
  },
  {
    name: "enableAutoPipelining: false, responseEncoding: false",
    tag: "plain",
    options: { enableAutoPipelining: false, responseEncoding: false as const },
  },
];

describe.each(configs)("@upstash/redis with $name", ({ tag, options }) => {
  let redis: Redis;
  // Twin keys: `sdk(name)` is written by the client, `cli(name)` by redis-cli.
  const sdk = (name: string) => `${tag}:sdk:${name}`;
  const cli = (name: string) => `${tag}:cli:${name}`;
  const cliRun = (...args: (string | number)[]) => redisCliResult(port, ...args);

  beforeAll(() => {
    const node = cluster.nodes[0];
    if (!node) throw new Error("no node");
    // Default retry policy is fine here: every request reaches a healthy bridge.
    redis = new Redis({ url: node.url, token: node.token, ...options });
  });

  it("SET NX PX answers OK, then null when the key exists", async () => {
    const first = await redis.set(sdk("lock"), "v-1", { nx: true, px: 60_000 });
    expect(first).toBe("OK");
    expect(first).toEqual(await cliRun("set", cli("lock"), "v-1", "nx", "px", 60_000));

    const second = await redis.set(sdk("lock"), "v-2", {
      nx: true,
      px: 60_000,
    });
    expect(second).toBeNull();
    expect(second).toEqual(await cliRun("set", cli("lock"), "v-2", "nx", "px", 60_000));
  });

  it("GET returns the stored string, UTF-8 intact, and null for a missing key", async () => {
    await cliRun("set", sdk("text"), "v-ü-€-😀");
    const value = await redis.get(sdk("text"));
    expect(value).toBe("v-ü-€-😀");
    expect(value).toEqual(await cliRun("get", sdk("text")));

    const missing = await redis.get(sdk("missing"));
    expect(missing).toBeNull();
    expect(missing).toEqual(await cliRun("get", sdk("missing")));
  });

  it("DEL counts deleted keys", async () => {
    await cliRun("set", sdk("del"), "v-d");
    await cliRun("set", cli("del"), "v-d");
    const deleted = await redis.del(sdk("del"));
    expect(deleted).toBe(1);
    expect(deleted).toEqual(await cliRun("del", cli("del")));

    const again = await redis.del(sdk("del"));
    expect(again).toBe(0);
    expect(again).toEqual(await cliRun("del", cli("del")));
  });

  it("PTTL: -2 for a missing key, -1 without TTL, the remaining ms otherwise", async () => {
    const missing = await redis.pttl(sdk("ttl-missing"));
    expect(missing).toBe(-2);
    expect(missing).toEqual(await cliRun("pttl", sdk("ttl-missing")));

    await cliRun("set", sdk("ttl-none"), "v-t");
    const none = await redis.pttl(sdk("ttl-none"));
    expect(none).toBe(-1);
    expect(none).toEqual(await cliRun("pttl", sdk("ttl-none")));

    // The clock runs between the two reads, so only closeness can be compared.
    await cliRun("set", sdk("ttl"), "v-t", "px", 60_000);
    const viaClient = await redis.pttl(sdk("ttl"));
    const viaCli = (await cliRun("pttl", sdk("ttl"))) as number;
    expect(viaClient).toBeGreaterThan(0);
    expect(viaClient).toBeLessThanOrEqual(60_000);
    expect(Math.abs(viaClient - viaCli)).toBeLessThan(2_000);
  });

  describe("EVAL", () => {
    const compareAndDelete =
      "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    it("returns an integer", async () => {
      await cliRun("set", sdk("cad"), "tok-a");
      await cliRun("set", cli("cad"), "tok-a");
      const deleted = await redis.eval(compareAndDelete, [sdk("cad")], ["tok-a"]);
      expect(deleted).toBe(1);
      expect(deleted).toEqual(await cliRun("eval", compareAndDelete, 1, cli("cad"), "tok-a"));

      const notOwner = await redis.eval(compareAndDelete, [sdk("cad")], ["tok-a"]);
      expect(notOwner).toBe(0);
      expect(notOwner).toEqual(await cliRun("eval", compareAndDelete, 1, cli("cad"), "tok-a"));
    });

    it("returns nil", async () => {
      const script = "return redis.call('get', KEYS[1])";
      const result = await redis.eval(script, [sdk("eval-missing")], []);
      expect(result).toBeNull();
      expect(result).toEqual(await cliRun("eval", script, 1, sdk("eval-missing")));
    });

    it("returns a string", async () => {
      const script = "return ARGV[1]";
      const result = await redis.eval(script, [], ["hello-x"]);
      expect(result).toBe("hello-x");
      expect(result).toEqual(await cliRun("eval", script, 0, "hello-x"));
    });

    it("returns an array containing a status reply (OK)", async () => {
      // The base64 pitfall: the client decodes every string inside an array, so the bridge must
      // encode "OK" there too, or the client would return [8].
      const script = "return {redis.call('set', KEYS[1], 'x')}";
      const result = await redis.eval(script, [sdk("eval-ok")], []);
      expect(result).toEqual(["OK"]);
      expect(result).toEqual(await cliRun("eval", script, 1, cli("eval-ok")));
    });

    it("returns nested arrays of integers, strings and status replies", async () => {
      const script = "return {1, 'a-x', {2, redis.status_reply('OK'), 'b-y'}}";
      const result = await redis.eval(script, [], []);
      expect(result).toEqual([1, "a-x", [2, "OK", "b-y"]]);
      expect(result).toEqual(await cliRun("eval", script, 0));
    });
  });

  it("EVALSHA of an unknown script fails with NOSCRIPT", async () => {
    const sha = "ffffffffffffffffffffffffffffffffffffffff";
    const expected = await redisCliError(port, "evalsha", sha, 0);
    expect(expected).toMatch(/^NOSCRIPT/);
    // The client adds its own prefix/suffix ("Command failed: …" when auto-pipelined,
    // "…, command was: […]" otherwise); Redis's text must be inside.
    await expect(redis.evalsha(sha, [], [])).rejects.toThrow(expected);
  });

  it("SCRIPT LOAD returns the same SHA-1 as redis-cli", async () => {
    const script = `return 'loaded-${tag}'`;
    const sha = await redis.scriptLoad(script);
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
    expect(sha).toEqual(await cliRun("script", "load", script));
  });

  it("createScript: after SCRIPT FLUSH, exec falls back from EVALSHA to EVAL", async () => {
    const source = "return {KEYS[1], ARGV[1]}";
    const script = redis.createScript<string[]>(source);
    await cliRun("script", "flush");
    const sha = (await cliRun("script", "load", source)) as string;
    await cliRun("script", "flush");
    expect(await cliRun("script", "exists", sha)).toEqual([0]);

    const result = await script.exec([sdk("script")], ["arg-x"]);
    expect(result).toEqual([sdk("script"), "arg-x"]);
    expect(result).toEqual(await cliRun("eval", source, 1, sdk("script"), "arg-x"));
    // The fallback EVAL cached the script on the server.
    expect(await cliRun("script", "exists", sha)).toEqual([1]);
  });

  describe("explicit pipeline with one failing command", () => {
    const prepare = async () => {
      for (const key of [sdk("p-str"), cli("p-str")]) await cliRun("set", key, "not-a-number");
    };
    const build = () => {
      const p = redis.pipeline();
      p.set(sdk("p-a"), "v-a");
      p.incr(sdk("p-str"));
      p.get(sdk("p-a"));
      return p;
    };
    const cliEquivalent = async () => [
      await redisCli(port, "set", cli("p-a"), "v-a"),
      await redisCli(port, "incr", cli("p-str")),
      await redisCli(port, "get", cli("p-a")),
    ];

    it("exec({ keepErrors: true }) returns each result or error", async () => {
      await prepare();
      const results = await build().exec({ keepErrors: true });
      const expected = await cliEquivalent();
      expect(results).toHaveLength(3);
      results.forEach((item, i) => {
        const cliReply = expected[i];
        if (cliReply && "error" in cliReply) {
          expect(item.error).toBe(cliReply.error);
          expect(item.result).toBeUndefined();
        } else {
          expect(item.error).toBeUndefined();
          expect(item.result).toEqual(cliReply?.result);
        }
      });
      expect(results.map((r) => r.result)).toEqual(["OK", undefined, "v-a"]);
    });

    it("exec() throws with the failing command's Redis error", async () => {
      await prepare();
      const expected = await redisCliError(port, "incr", cli("p-str"));
      await expect(build().exec()).rejects.toThrow(`Command 2 [ incr ] failed: ${expected}`);
    });
  });

  it("MULTI/EXEC runs the commands and returns every result", async () => {
    const m = redis.multi();
    m.set(sdk("m-a"), "v-m", { px: 60_000 });
    m.get(sdk("m-a"));
    m.incr(sdk("m-counter"));
    m.del(sdk("m-a"));
    const results = await m.exec();
    const expected = [
      await cliRun("set", cli("m-a"), "v-m", "px", 60_000),
      await cliRun("get", cli("m-a")),
      await cliRun("incr", cli("m-counter")),
      await cliRun("del", cli("m-a")),
    ];
    expect(results).toEqual(["OK", "v-m", 1, 1]);
    expect(results).toEqual(expected);
  });

  it("MULTI/EXEC keeps a runtime error per command (keepErrors)", async () => {
    for (const key of [sdk("m-str"), cli("m-str")]) await cliRun("set", key, "not-a-number");
    const m = redis.multi();
    m.incr(sdk("m-str"));
    m.get(sdk("m-str"));
    const results = await m.exec({ keepErrors: true });
    const incrError = await redisCliError(port, "incr", cli("m-str"));
    expect(results[0]?.error).toBe(incrError);
    expect(results[1]?.result).toEqual(await cliRun("get", cli("m-str")));
  });
});
