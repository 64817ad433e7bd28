/**
 * Differential test: the fencing scripts on a real redis-server (through its REST bridge) and on
 * the memory node of `edge-redlock/testing` (their TypeScript mirror, src/testing/fencing.ts) give
 * the same answers to the same random sequences of commands, including corrupted data, restarts
 * (the namespace wiped) and expired quarantines; and the fenced write lock of a read-write lock
 * (`fence-rw-write`, the ratchet on its write key) among readers, marks and wrong types. This is what lets the unit-level property tests,
 * and users' tests on memory nodes, speak for the real scripts.
 */
import fc from "fast-check";
import { describe, expect, inject, it } from "vitest";
import { releaseScript } from "../../src/core/scripts/release.js";
import { runScript, type Script } from "../../src/core/scripts/script.js";
import { fencedWriteScript } from "../../src/fencing/guard.js";
import { fencingKeys } from "../../src/fencing/keys.js";
import { fenceAcquireScript } from "../../src/fencing/scripts/fence-acquire.js";
import { fenceInitScript } from "../../src/fencing/scripts/fence-init.js";
import { fenceQuarantineScript } from "../../src/fencing/scripts/fence-quarantine.js";
import { fenceRatchetScript } from "../../src/fencing/scripts/fence-ratchet.js";
import { fenceReadScript } from "../../src/fencing/scripts/fence-read.js";
import { fenceRepairScript } from "../../src/fencing/scripts/fence-repair.js";
import { fenceRwWriteScript } from "../../src/fencing/scripts/fence-rw-write.js";
import { restNode } from "../../src/index.js";
import { primitiveKey } from "../../src/primitives/calls.js";
import { rwReadScript } from "../../src/primitives/scripts/rw-read.js";
import { rwReleaseScript } from "../../src/primitives/scripts/rw-release.js";
import { memoryNode } from "../../src/testing/index.js";
import type { RedisArgument, RedisNode, RedisReply } from "../../src/transport/rest.js";
import { uniqueKey } from "./support/nodes.js";

const endpoint = inject("nodes")[0]!;

const token = fc.constantFrom("tokA", "tokB");
const resources = fc.subarray(["a", "b"], { minLength: 1 });
const fence = fc.constantFrom("0", "1", "2", "5", "10", "9007199254740991", "01", "x");
const id = fc.constantFrom("aa11", "bb22", "zz");
/** The counter field of the read-write lock `d`: its write key without the prefix. */
const W = primitiveKey("", "rw", "d", "write");

/** One step, as data: a script call or a direct manipulation of the namespace. */
type Op =
  | { kind: "acquire"; token: string; resources: string[] }
  | { kind: "ratchet"; token: string; resources: string[]; fence: string }
  | { kind: "read"; resources: string[] }
  | { kind: "repair"; id: string; fence: string; resources: string[] }
  | { kind: "quarantine"; id: string }
  | { kind: "init"; id: string }
  | { kind: "release"; token: string; resources: string[] }
  | { kind: "guard"; fence: string; token: string }
  | { kind: "expire-quarantine" }
  | { kind: "restart" }
  | { kind: "corrupt-counter"; resource: string; value: string }
  | { kind: "corrupt-marker"; value: string }
  | { kind: "rw-write"; token: string; writer: string; markTtl: string; field: string }
  | { kind: "rw-read"; token: string }
  | { kind: "rw-ratchet"; token: string; fence: string }
  | { kind: "rw-release"; token: string }
  | { kind: "rw-corrupt-readers" };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("acquire" as const), token, resources }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("ratchet" as const), token, resources, fence }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("read" as const), resources: fc.subarray(["a", "b"]) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("repair" as const), id, fence, resources }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("quarantine" as const), id }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("init" as const), id }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("release" as const), token, resources }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("guard" as const), fence, token }) },
  { weight: 1, arbitrary: fc.constant({ kind: "expire-quarantine" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "restart" as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("corrupt-counter" as const),
      resource: fc.constantFrom("a", "b"),
      value: fc.constantFrom("abc", "01", "1e3", "9007199254740993", "7"),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("corrupt-marker" as const),
      value: fc.constantFrom("ok:zz", "weird", "recovering:aa11", "ok:bb22"),
    }),
  },
);

/** The steps above, and those of a read-write lock `d` with a fenced write lock. */
const rwOp: fc.Arbitrary<Op> = fc.oneof(
  { weight: 12, arbitrary: op },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("rw-write" as const),
      token,
      writer: fc.constantFrom("w1", "w2"),
      markTtl: fc.constantFrom("0", "60000"),
      field: fc.constantFrom(W, W, W, ""),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("rw-read" as const), token: fc.constantFrom("r1", "r2") }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("rw-ratchet" as const), token, fence }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("rw-release" as const), token: fc.constantFrom("tokA", "tokB", "r1") }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "rw-corrupt-readers" as const }) },
);

/** What a call answered, normalised so that both sides' error texts compare. */
type Answer = { reply: RedisReply } | { error: string };

function normaliseError(error: unknown): string {
  const message = (error as { redisError?: string }).redisError ?? String(error);
  if (message.includes("WRONGTYPE")) return "WRONGTYPE";
  // Redis appends " script: <sha>, on @user_script:<line>." to a script's error.
  const text = message.replace(/ script: .*$/s, "");
  return /(edge-redlock|fenced-write): [a-z0-9 -]+$/.exec(text)?.[0] ?? `unrecognised: ${message}`;
}

/** One node, real or in memory: each step becomes the same commands on either. */
class Side {
  constructor(
    readonly node: RedisNode,
    readonly prefix: string,
  ) {}

  get keys() {
    return fencingKeys(this.prefix);
  }

  private lockKeys(resources: readonly string[]): string[] {
    return resources.map((r) => this.prefix + r);
  }

  /** The read-write lock `d`'s keys: write key, readers, writer-waiting mark. */
  private get rw(): string[] {
    return ["write", "readers", "writer-waiting"].map((part) => primitiveKey(this.prefix, "rw", "d", part));
  }

  private async script(script: Script, keys: string[], args: RedisArgument[]): Promise<Answer> {
    const context = { signal: AbortSignal.timeout(5000), countRequest() {} };
    try {
      return { reply: await runScript(this.node, script, keys, args, context) };
    } catch (error) {
      return { error: normaliseError(error) };
    }
  }

  private async command(...args: RedisArgument[]): Promise<void> {
    await this.node.command(args, AbortSignal.timeout(5000));
  }

  async apply(step: Op): Promise<Answer | undefined> {
    const k = this.keys;
    const four = [k.incarnation, k.quarantine, k.counters, k.repairs];
    switch (step.kind) {
      case "acquire":
        return this.script(
          fenceAcquireScript,
          [...four, ...this.lockKeys(step.resources)],
          [step.token, 60_000, ...step.resources],
        );
      case "ratchet":
        return this.script(
          fenceRatchetScript,
          [...four, ...this.lockKeys(step.resources)],
          [step.token, step.fence, ...step.resources],
        );
      case "read":
        return this.script(fenceReadScript, four, step.resources);
      case "repair":
        return this.script(fenceRepairScript, four, [step.id, step.fence, ...step.resources]);
      case "quarantine":
        return this.script(fenceQuarantineScript, [k.incarnation, k.quarantine], [step.id, 60_000]);
      case "init":
        return this.script(fenceInitScript, [k.incarnation], [step.id]);
      case "release":
        return this.script(releaseScript, this.lockKeys(step.resources), [step.token]);
      case "guard":
        return this.script(
          fencedWriteScript,
          [`${this.prefix}guard`, `${this.prefix}record`],
          [step.fence, step.token, `by ${step.token}`],
        );
      case "rw-write":
        return this.script(
          fenceRwWriteScript,
          [...four, ...this.rw],
          [step.token, 60_000, step.writer, step.markTtl, step.field],
        );
      case "rw-read":
        return this.script(rwReadScript, this.rw, [step.token, 60_000]);
      case "rw-ratchet":
        return this.script(fenceRatchetScript, [...four, this.rw[0] as string], [step.token, step.fence, W]);
      case "rw-release":
        return this.script(rwReleaseScript, this.rw, [step.token, "w1"]);
      case "rw-corrupt-readers":
        await this.command("SET", this.rw[1] as string, "not a sorted set");
        return undefined;
      case "expire-quarantine":
        await this.command("DEL", k.quarantine);
        return undefined;
      case "restart":
        await this.command("DEL", ...four, ...this.lockKeys(["a", "b"]), ...this.rw);
        return undefined;
      case "corrupt-counter":
        await this.command("HSET", k.counters, step.resource, step.value);
        return undefined;
      case "corrupt-marker":
        await this.command("SET", k.incarnation, step.value);
        return undefined;
    }
  }
}

/** A model with one deliberate bug: its ratchet acknowledges an equal counter (`F <= t`). */
class BuggySide extends Side {
  override async apply(step: Op): Promise<Answer | undefined> {
    const answer = await super.apply(step);
    if (step.kind !== "ratchet" || !answer || !("reply" in answer) || !Array.isArray(answer.reply)) return answer;
    const [status, current, id] = answer.reply;
    return status === "NACK" && current === step.fence ? { reply: ["ACK", step.fence, id ?? ""] } : answer;
  }
}

/**
 * Applies `steps` to redis-server and to the memory node under a fresh prefix named `name`,
 * expecting the same answer at every step; `seen` gets each step with the real node's answer.
 */
async function answerAlike(steps: readonly Op[], name: string, seen: (step: Op, answer: Answer) => void) {
  const prefix = `${uniqueKey(name)}:`;
  const real = new Side(restNode(endpoint), prefix);
  const model = new Side(memoryNode({ id: "model" }), prefix);
  for (const [index, step] of steps.entries()) {
    const expected = await real.apply(step);
    const actual = await model.apply(step);
    expect(actual, `step ${index}: ${JSON.stringify(step)}`).toEqual(expected);
    if (expected) seen(step, expected);
  }
}

describe("fencing scripts: real redis-server versus the memory node", () => {
  it("negative control: a model with an off-by-one ratchet is caught", async () => {
    const result = await fc.check(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 25 }), async (tail) => {
        const prefix = `${uniqueKey("fence-diff-buggy")}:`;
        const real = new Side(restNode(endpoint), prefix);
        const model = new BuggySide(memoryNode({ id: "model" }), prefix);
        const start: Op[] = [
          { kind: "init", id: "aa11" },
          { kind: "acquire", token: "tokA", resources: ["a"] },
          { kind: "ratchet", token: "tokA", resources: ["a"], fence: "5" },
        ];
        for (const step of [...start, ...tail]) {
          if (JSON.stringify(await model.apply(step)) !== JSON.stringify(await real.apply(step))) return false;
        }
        return true;
      }),
      { numRuns: 100, seed: 22 },
    );
    expect(result.failed).toBe(true);
  }, 120_000);

  it("answer alike on random operation sequences", async () => {
    let compared = 0;
    const statuses = new Set<string>();
    await fc.assert(
      fc.asyncProperty(fc.boolean(), fc.array(op, { minLength: 1, maxLength: 25 }), async (initialised, tail) => {
        // Most sequences start from an initialised node holding a lock, where the interesting
        // answers (ACK, NACK, LOST, BUSY) live; the others start from an empty one.
        const start: Op[] = [
          { kind: "init", id: "aa11" },
          { kind: "acquire", token: "tokA", resources: ["a", "b"] },
          { kind: "ratchet", token: "tokA", resources: ["a", "b"], fence: "5" },
          { kind: "guard", fence: "5", token: "tokA" },
        ];
        await answerAlike(initialised ? [...start, ...tail] : tail, "fence-diff", (_, expected) => {
          compared++;
          const { reply } = expected as { reply?: RedisReply };
          statuses.add(
            Array.isArray(reply) ? JSON.stringify(reply[0]) : ((expected as { error?: string }).error ?? ""),
          );
        });
      }),
      { numRuns: 100, seed: 21 },
    );
    expect(compared).toBeGreaterThan(300);
    // The sequences reached every answer the client has to handle, errors included.
    for (const status of [
      "OK",
      "BUSY",
      "ACK",
      "NACK",
      "LOST",
      "NO_MARKER",
      "QUARANTINED",
      "NEEDS_REPAIR",
      "REPAIRED",
      "STALE",
      "PRESENT",
      "INITIALIZED",
    ]) {
      expect(statuses, status).toContain(JSON.stringify(status));
    }
    // The guard both applied and rejected writes.
    expect(statuses).toContain("1");
    expect(statuses).toContain("0");
    expect(statuses).toContain("edge-redlock: corrupt fence counter");
    expect(statuses).toContain("edge-redlock: corrupt incarnation marker");
    expect(statuses).toContain("edge-redlock: invalid proposed fence");
  }, 120_000);

  it("the fenced write lock's phase 1, and the ratchet on its write key, answer alike", async () => {
    let compared = 0;
    const rwStatuses = new Set<string>();
    await fc.assert(
      fc.asyncProperty(fc.boolean(), fc.array(rwOp, { minLength: 1, maxLength: 25 }), async (initialised, tail) => {
        const start: Op[] = [
          { kind: "init", id: "aa11" },
          { kind: "rw-write", token: "tokA", writer: "w1", markTtl: "0", field: W },
          { kind: "rw-ratchet", token: "tokA", fence: "5" },
        ];
        await answerAlike(initialised ? [...start, ...tail] : tail, "fence-diff-rw", (step, expected) => {
          if (!step.kind.startsWith("rw-")) return;
          compared++;
          const { reply, error } = expected as { reply?: RedisReply; error?: string };
          rwStatuses.add(`${step.kind} ${error ?? JSON.stringify(Array.isArray(reply) ? reply[0] : reply)}`);
        });
      }),
      { numRuns: 100, seed: 31 },
    );
    expect(compared).toBeGreaterThan(300);
    // The fenced write lock's phase 1 and its ratchet on the write key reached their answers too.
    for (const answer of [
      'rw-write "OK"',
      'rw-write "BUSY"',
      'rw-write "NO_MARKER"',
      'rw-write "QUARANTINED"',
      'rw-write "NEEDS_REPAIR"',
      "rw-write WRONGTYPE",
      "rw-write edge-redlock: bad fenced write lock call",
      'rw-ratchet "ACK"',
      'rw-ratchet "LOST"',
      "rw-read 0",
      "rw-read 1",
    ]) {
      expect(rwStatuses, answer).toContain(answer);
    }
  }, 120_000);
});
