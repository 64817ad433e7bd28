/**
 * Differential test: the memory node of `edge-redlock/testing` and a real redis-server (through
 * its REST bridge) give the same answers to the same random sequences of the plain commands and
 * core scripts the library sends: `SET NX PX`, `GET`, `PTTL`, `PEXPIRE`, `DEL`, the all-or-none
 * acquisition, extension, release, verification, inspection, the cluster check and the hand-over,
 * on keys that are free, held, foreign, or hashes (WRONGTYPE), and with bad arguments (Redis's
 * errors); and `TIME` (the preflight's clock check), in its shape. The gate scripts are compared in
 * gate-differential.test.ts, the fencing scripts and the fenced-write guard in
 * fencing-differential.test.ts.
 */
import fc from "fast-check";
import { describe, expect, inject, it } from "vitest";
import { acquireAllScript } from "../../src/core/scripts/acquire-all.js";
import { clusterScript } from "../../src/core/scripts/cluster.js";
import { extendScript } from "../../src/core/scripts/extend.js";
import { inspectScript } from "../../src/core/scripts/inspect.js";
import { releaseScript } from "../../src/core/scripts/release.js";
import { verifyScript } from "../../src/core/scripts/verify.js";
import { type RedisNode, type RedisReply, restNode } from "../../src/index.js";
import { memoryNode } from "../../src/testing/index.js";
import { handOverScript } from "../../src/waiting/scripts/hand-over.js";
import { type Answer, DifferentialSide } from "./support/differential.js";
import { uniqueKey } from "./support/nodes.js";

const endpoint = inject("nodes")[0]!;

const name = fc.constantFrom("a", "b", "c");
const names = fc.subarray(["a", "b", "c"], { minLength: 1 });
const token = fc.constantFrom("tokA", "tokB");
/** TTLs as a script receives them: long ones (nothing expires during a run), and bad ones. */
const ttl = fc.constantFrom("60000", "60000", "30000", "0", "-5", "x", "010");

/** One step, as data. */
type Op =
  | { kind: "set-nx"; key: string; value: string; ttlMs: number }
  | { kind: "set"; key: string; value: string }
  | { kind: "hset"; key: string }
  | { kind: "get" | "pttl" | "del" | "incr"; key: string }
  | { kind: "pexpire"; key: string; ttlMs: number }
  | { kind: "acquire-all" | "extend"; keys: string[]; token: string; ttl: string }
  | { kind: "release" | "verify"; keys: string[]; token: string }
  | { kind: "inspect"; key: string }
  | { kind: "cluster"; fingerprint: string; mode: string }
  | { kind: "hand-over"; keys: string[]; token: string; next: string; ttl: string }
  | { kind: "unknown-sha" }
  | { kind: "bad-key-count" };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("set-nx" as const),
      key: name,
      value: token,
      ttlMs: fc.constantFrom(60_000, 0),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("set" as const), key: name, value: fc.constantFrom("5", "tokB") }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("hset" as const), key: name }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constantFrom("get", "pttl", "del", "incr"), key: name }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("pexpire" as const), key: name, ttlMs: fc.constantFrom(30_000, 0) }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constantFrom("acquire-all", "extend"), keys: names, token, ttl }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constantFrom("release", "verify"), keys: names, token }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("inspect" as const), key: name }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("cluster" as const),
      fingerprint: fc.constantFrom("fpA", "fpB"),
      mode: fc.constantFrom("check", "check", "reset"),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant("hand-over" as const), keys: names, token, next: token, ttl }),
  },
  { weight: 1, arbitrary: fc.constantFrom({ kind: "unknown-sha" as const }, { kind: "bad-key-count" as const }) },
);

/** The steps whose numbers are PTTLs: compared within a tolerance, as both sides read time apart. */
const TIMED = new Set(["pttl", "verify", "inspect"]);

/** One node, real or in memory, under a key prefix of its own: each step becomes the same commands on either. */
class Side extends DifferentialSide {
  apply(step: Op): Promise<Answer> {
    switch (step.kind) {
      case "set-nx":
        return this.send("SET", this.key(step.key), step.value, "NX", "PX", step.ttlMs);
      case "set":
        return this.send("SET", this.key(step.key), step.value);
      case "hset":
        return this.send("HSET", this.key(step.key), "field", "1");
      case "get":
      case "pttl":
      case "del":
      case "incr":
        return this.send(step.kind.toUpperCase(), this.key(step.key));
      case "pexpire":
        return this.send("PEXPIRE", this.key(step.key), step.ttlMs);
      case "acquire-all":
        return this.script(acquireAllScript, step.keys, [step.token, step.ttl]);
      case "extend":
        return this.script(extendScript, step.keys, [step.token, step.ttl]);
      case "release":
        return this.script(releaseScript, step.keys, [step.token]);
      case "verify":
        return this.script(verifyScript, step.keys, [step.token]);
      case "inspect":
        return this.script(inspectScript, [step.key], []);
      case "cluster":
        return this.script(clusterScript, ["cluster"], [step.fingerprint, step.mode]);
      case "hand-over":
        return this.script(handOverScript, step.keys, [step.token, step.next, step.ttl]);
      case "unknown-sha":
        return this.send("EVALSHA", "0123456789abcdef0123456789abcdef01234567", 0);
      case "bad-key-count":
        return this.send("EVALSHA", releaseScript.sha1, 3, this.key("a"), "tokA");
    }
  }
}

/** `answer` with every PTTL (a positive number of a timed step) replaced by "ttl", and those PTTLs. */
function untimed(step: Op, answer: Answer): { answer: Answer; ttls: number[] } {
  if (!TIMED.has(step.kind) || !("reply" in answer)) return { answer, ttls: [] };
  const ttls: number[] = [];
  const strip = (reply: RedisReply): RedisReply => {
    if (Array.isArray(reply)) return reply.map(strip);
    if (typeof reply === "number" && reply > 0) {
      ttls.push(reply);
      return "ttl";
    }
    return reply;
  };
  return { answer: { reply: strip(answer.reply) }, ttls };
}

/** Whether two answers agree: equal but for PTTLs, which must lie within 2 s of each other. */
function agree(step: Op, real: Answer, model: Answer): boolean {
  const a = untimed(step, real);
  const b = untimed(step, model);
  return (
    JSON.stringify(a.answer) === JSON.stringify(b.answer) &&
    a.ttls.every((ttl, i) => Math.abs(ttl - (b.ttls[i] as number)) < 2000)
  );
}

/** A memory node with one deliberate bug: its release deletes the keys whoever holds them. */
function careless(): RedisNode {
  const node = memoryNode({ id: "careless" });
  return {
    id: node.id,
    command(args, signal) {
      if (args[0] === "EVALSHA" && args[1] === releaseScript.sha1) {
        const keys = args.slice(3, 3 + Number(args[2]));
        return node.command(["DEL", ...keys], signal);
      }
      return node.command(args, signal);
    },
  };
}

/** Every step on both sides; the first disagreement, or undefined. */
async function compare(real: Side, model: Side, steps: readonly Op[], seen?: Set<string>): Promise<string | undefined> {
  for (const [index, step] of steps.entries()) {
    const expected = await real.apply(step);
    const actual = await model.apply(step);
    if (!agree(step, expected, actual)) {
      return `step ${index} ${JSON.stringify(step)}: redis ${JSON.stringify(expected)}, memory node ${JSON.stringify(actual)}`;
    }
    seen?.add(`${step.kind} ${JSON.stringify(untimed(step, expected).answer)}`);
  }
  return undefined;
}

describe("plain commands and core scripts: real redis-server versus the memory node", () => {
  it("answer alike on random sequences, errors included", async () => {
    const seen = new Set<string>();
    let steps = 0;
    await fc.assert(
      fc.asyncProperty(fc.boolean(), fc.array(op, { minLength: 1, maxLength: 30 }), async (started, tail) => {
        // Half the sequences start from a lock on a and b and a hash at c, where held, foreign
        // and wrong-type keys meet; the others from an empty node.
        const start: Op[] = [
          { kind: "acquire-all", keys: ["a", "b"], token: "tokA", ttl: "60000" },
          { kind: "hset", key: "c" },
        ];
        const sequence = started ? [...start, ...tail] : tail;
        const prefix = `${uniqueKey("memory-diff")}:`;
        const real = new Side(restNode(endpoint), prefix);
        const model = new Side(memoryNode({ id: "model" }), prefix);
        expect(await compare(real, model, sequence, seen)).toBeUndefined();
        steps += sequence.length;
      }),
      { numRuns: 250, seed: 30 },
    );
    expect(steps).toBeGreaterThan(1500);
    // The sequences reached the answers the library tells apart, and Redis's errors.
    for (const answer of [
      'set-nx {"reply":"OK"}',
      'set-nx {"reply":null}',
      'acquire-all {"reply":1}',
      'acquire-all {"reply":0}',
      'extend {"reply":1}',
      'extend {"reply":0}',
      'release {"reply":0}',
      'release {"reply":1}',
      'release {"reply":2}',
      'verify {"reply":-1}',
      'verify {"reply":"ttl"}',
      'inspect {"reply":[null,-2]}',
      'inspect {"reply":["tokA","ttl"]}',
      'inspect {"reply":["5",-1]}',
      'cluster {"reply":"fpA"}',
      'cluster {"reply":"fpB"}',
      'hand-over {"reply":[0,1]}',
      'hand-over {"reply":[1,1]}',
      'hand-over {"reply":[0,0]}',
      'hand-over {"reply":[1,0]}',
      'get {"error":"WRONGTYPE Operation against a key holding the wrong kind of value"}',
      'release {"error":"WRONGTYPE Operation against a key holding the wrong kind of value"}',
      'incr {"error":"ERR value is not an integer or out of range"}',
      'acquire-all {"error":"ERR invalid expire time in \'set\' command"}',
      'unknown-sha {"error":"NOSCRIPT No matching script. Please use EVAL."}',
    ]) {
      expect(seen, answer).toContain(answer);
    }
  }, 300_000);

  it("agree on expiry: a key past its TTL is gone on both, a longer one lives on both", async () => {
    const prefix = `${uniqueKey("memory-diff-expiry")}:`;
    const real = new Side(restNode(endpoint), prefix);
    const model = new Side(memoryNode({ id: "model" }), prefix);
    const setup: Op[] = [
      { kind: "set-nx", key: "a", value: "tokA", ttlMs: 300 },
      { kind: "acquire-all", keys: ["b"], token: "tokA", ttl: "300" },
      { kind: "set-nx", key: "c", value: "tokA", ttlMs: 60_000 },
    ];
    expect(await compare(real, model, setup)).toBeUndefined();
    // Far past the short TTL, far before the long one, on a loaded machine too.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const after: Op[] = [
      { kind: "get", key: "a" },
      { kind: "pttl", key: "b" },
      { kind: "inspect", key: "c" },
      { kind: "verify", keys: ["a", "c"], token: "tokA" },
      { kind: "extend", keys: ["b"], token: "tokA", ttl: "60000" },
      { kind: "acquire-all", keys: ["a", "b"], token: "tokB", ttl: "60000" },
      { kind: "release", keys: ["a", "b", "c"], token: "tokA" },
    ];
    const seen = new Set<string>();
    expect(await compare(real, model, after, seen)).toBeUndefined();
    expect([...seen]).toEqual([
      'get {"reply":null}',
      'pttl {"reply":-2}',
      'inspect {"reply":["tokA","ttl"]}',
      'verify {"reply":-1}',
      'extend {"reply":0}',
      'acquire-all {"reply":1}',
      'release {"reply":1}',
    ]);
  });

  it("answer TIME alike: whole seconds and the microseconds within, as strings, on a wall clock", async () => {
    const signal = () => AbortSignal.timeout(5000);
    const before = Date.now();
    const [real, model] = await Promise.all([
      restNode(endpoint).command(["TIME"], signal()),
      memoryNode().command(["TIME"], signal()),
    ]);
    const after = Date.now();
    for (const reply of [real, model]) {
      expect(reply).toEqual([expect.stringMatching(/^[1-9]\d*$/), expect.stringMatching(/^(0|[1-9]\d{0,5})$/)]);
      const [seconds, micros] = (reply as string[]).map(Number) as [number, number];
      const ms = seconds * 1000 + micros / 1000;
      // Both read the wall clock of this machine (the redis-server runs here).
      expect(ms).toBeGreaterThanOrEqual(before - 1000);
      expect(ms).toBeLessThanOrEqual(after + 1000);
    }
  });

  it("negative control: a memory node whose release ignores the token is caught", async () => {
    const result = await fc.check(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 30 }), async (sequence) => {
        const prefix = `${uniqueKey("memory-diff-careless")}:`;
        return (
          (await compare(new Side(restNode(endpoint), prefix), new Side(careless(), prefix), sequence)) === undefined
        );
      }),
      { numRuns: 80, seed: 31 },
    );
    expect(result.failed).toBe(true);
  }, 300_000);
});
