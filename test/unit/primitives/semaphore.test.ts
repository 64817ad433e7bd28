/**
 * The semaphore on memory nodes: never more holders than permits (on the clients' side and on the
 * nodes' own keys), the counterexample (k = 2, N = 3, three clients that each reach a
 * different pair of nodes first) with the count-per-node design as the negative control that the
 * same checker must catch, what a permit costs in requests, waiting, and its Lock.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  InvalidArgumentError,
  type Lock,
  LockHeldError,
  type RedisArgument,
  type RedisNode,
  type RedisReply,
  Redlock,
  Semaphore,
} from "../../../src/index.js";
import { primitiveKey } from "../../../src/primitives/calls.js";
import { lineGate, lineKeys, PROBE_EVERY } from "../../../src/primitives/semaphore-line.js";
import { type MemoryNode, memoryNodes } from "../../../src/testing/index.js";
import { onQuorum } from "../../../tools/chaos/checkers/primitives.js";
import { counted, delayed, kinds, sleep, slotHolders } from "./support.js";

afterEach(() => {
  vi.restoreAllMocks();
});

/** Client `c` of three reaches nodes c and c + 1 at once, node c + 2 `lateMs` later. */
function pairFirst(nodes: readonly RedisNode[], client: number, lateMs: number): RedisNode[] {
  return nodes.map((node, i) => delayed(node, i === (client + 2) % 3 ? lateMs : 0));
}

describe("never more holders than permits", () => {
  it("takes exactly `permits` permits one after the other, each on its own slot with its own token on every node", async () => {
    const nodes = memoryNodes(3);
    const upstream = new Semaphore(new Redlock({ nodes }), "upstream", 3);
    const permits: Lock[] = [];
    for (;;) {
      const permit = await upstream.tryAcquire(10_000);
      if (permit === null) break;
      permits.push(permit);
    }
    expect(permits).toHaveLength(3);
    expect(new Set(permits.map((p) => p.keys[0])).size).toBe(3);
    expect(new Set(permits.map((p) => p.token)).size).toBe(3);
    for (const holders of slotHolders(nodes, "upstream")) {
      expect([...holders].sort()).toEqual(permits.map((p) => p.token).sort());
    }
    await permits[0]?.release();
    const again = await upstream.tryAcquire(10_000);
    expect(again?.keys).toEqual(permits[0]?.keys);
  });

  it("many clients at once: at most `permits` grants, and no more tokens on a quorum of the nodes", async () => {
    const nodes = memoryNodes(3);
    let granted = 0;
    for (let round = 0; round < 10; round++) {
      const name = `burst-${round}`;
      const clients = Array.from({ length: 8 }, () => new Semaphore(new Redlock({ nodes }), name, 3));
      const permits = (await Promise.all(clients.map((s) => s.tryAcquire(10_000)))).filter((p) => p !== null);
      expect(permits.length).toBeLessThanOrEqual(3);
      expect(onQuorum(slotHolders(nodes, name), 2).length).toBeLessThanOrEqual(3);
      granted += permits.length;
    }
    // Vote splits among callers that pick one slot at once may leave a slot free in a round; not most.
    expect(granted).toBeGreaterThanOrEqual(10);
  });

  it("the counterexample: k = 2, N = 3, three clients that each reach a different pair first never make three holders", async () => {
    const nodes = memoryNodes(3);
    let grants = 0;
    for (let round = 0; round < 20; round++) {
      const name = `pairs-${round}`;
      const clients = [0, 1, 2].map((c) => new Semaphore(new Redlock({ nodes: pairFirst(nodes, c, 30) }), name, 2));
      const permits = (await Promise.all(clients.map((s) => s.tryAcquire(10_000)))).filter((p) => p !== null);
      expect(permits.length).toBeLessThanOrEqual(2);
      expect(onQuorum(slotHolders(nodes, name), 2).length).toBeLessThanOrEqual(2);
      grants += permits.length;
      await Promise.all(permits.map((p) => p.release()));
    }
    expect(grants).toBeGreaterThanOrEqual(20);
  });

  it("negative control: a count per node under the same schedule admits three, and the same check catches it", async () => {
    const counting = [0, 1, 2].map((i) => countingNode(`count-${i}`, 2));
    const clients = [0, 1, 2].map((c) => pairFirst(counting, c, 30));
    const tokens = ["a", "b", "c"];
    const admitted = await Promise.all(
      clients.map(async (view, c) => {
        const yes = await Promise.all(
          view.map((node) => node.command(["ADMIT", tokens[c] as string], new AbortController().signal)),
        );
        return yes.filter((reply) => reply === 1).length >= 2;
      }),
    );
    expect(admitted).toEqual([true, true, true]);
    const holders = counting.map((node) => node.holders);
    expect(onQuorum(holders, 2).sort()).toEqual(["a", "b", "c"]);
  });
});

/**
 * The count-per-node design of other libraries, as one node runs it: `ADMIT token` adds the token
 * when fewer than `permits` hold (1), else refuses (0). What redis-semaphore's RedlockSemaphore
 * does with a sorted set per node; here in memory, as a negative control.
 */
function countingNode(id: string, permits: number): RedisNode & { holders: Set<string> } {
  const holders = new Set<string>();
  return {
    id,
    holders,
    async command(args: readonly RedisArgument[]): Promise<RedisReply> {
      if (holders.size >= permits) return 0;
      holders.add(String(args[1]));
      return 1;
    },
  };
}

describe("what a permit costs", () => {
  async function warm(nodes: MemoryNode[], log: RedisArgument[][]) {
    const redlock = new Redlock({ nodes: nodes.map((node) => counted(node, log)) });
    // The first acquisition of a client also checks the cluster's fingerprint: not counted below.
    await (await redlock.acquire("warm-up", 1000)).release();
    log.length = 0;
    return redlock;
  }

  it("a free permit: one fan-out, N requests, as a mutex", async () => {
    const nodes = memoryNodes(3);
    const log: RedisArgument[][] = [];
    const semaphore = new Semaphore(await warm(nodes, log), "cost", 5);
    const permit = await semaphore.acquire(10_000);
    expect(kinds(log)).toEqual({ sets: 3, probes: 0, polls: 0, leaves: 0 });
    expect(log).toHaveLength(3);
    expect(permit.acquireReport.requests).toBe(3);
  });

  it("when the slot tried first is held: one poll of the line, then a fan-out on the slot free at the gate (2N + 1)", async () => {
    const nodes = memoryNodes(3);
    const other = new Semaphore(new Redlock({ nodes }), "cost", 2);
    const log: RedisArgument[][] = [];
    const redlock = await warm(nodes, log);
    const semaphore = new Semaphore(redlock, "cost", 2);
    vi.spyOn(Math, "random").mockReturnValue(0);
    const held = await other.acquire(10_000);
    expect(held.keys[0]).toMatch(/:0$/);
    log.length = 0;
    const permit = await semaphore.acquire(10_000);
    expect(permit.keys[0]).toMatch(/:1$/);
    expect(kinds(log)).toMatchObject({ sets: 6, probes: 0, polls: 1 });
    expect(permit.acquireReport.requests).toBe(3);
    // Granted, it leaves the line in the background: one request more, sent after the grant.
    await redlock.settled();
    expect(kinds(log)).toEqual({ sets: 6, probes: 0, polls: 1, leaves: 1 });
    expect(log).toHaveLength(8);
  });

  it("while every permit is held: one request per poll of the line, at most 10 a second, then the released slot", async () => {
    const nodes = memoryNodes(3);
    const holder = await new Semaphore(new Redlock({ nodes }), "wait", 1).acquire(10_000);
    const log: RedisArgument[][] = [];
    const semaphore = new Semaphore(await warm(nodes, log), "wait", 1);
    const started = Date.now();
    const waiting = semaphore.acquire(10_000, { retryBaseDelayMs: 10, retryMaxDelayMs: 20, maxAttempts: 1000 });
    await sleep(500);
    const whileHeld = kinds(log);
    const elapsed = Date.now() - started;
    expect(whileHeld.sets).toBe(3);
    expect(whileHeld.polls).toBeGreaterThanOrEqual(2);
    // Paced: 100 ms at least between polls (and the first right after the refused try); as
    // first in line it also probes another node once in PROBE_EVERY polls.
    expect(whileHeld.polls).toBeLessThanOrEqual(Math.floor(elapsed / 100) + 1);
    expect(whileHeld.probes).toBeLessThanOrEqual(Math.ceil(whileHeld.polls / PROBE_EVERY));
    expect(log.length).toBe(whileHeld.sets + whileHeld.polls + whileHeld.probes);
    await holder.release();
    const permit = await waiting;
    expect(permit.keys).toEqual(holder.keys);
    expect(kinds(log).sets).toBe(6);
  });

  it("a stale key on the line's gate does not trap the first in line: it probes another node", async () => {
    const nodes = memoryNodes(3);
    vi.spyOn(Math, "random").mockReturnValue(0);
    const holder = await new Semaphore(new Redlock({ nodes }), "stale", 2).acquire(10_000);
    expect(holder.keys[0]).toMatch(/:0$/);
    // Slot 1 held on the gate alone (a leftover no quorum holds).
    const gate = lineGate(lineKeys("", "stale")[0], 3);
    const slot1 = primitiveKey("", "semaphore", "stale", "1");
    await nodes[gate]?.command(["SET", slot1, "leftover", "PX", 60_000], new AbortController().signal);
    const log: RedisArgument[][] = [];
    const semaphore = new Semaphore(await warm(nodes, log), "stale", 2);
    const permit = await semaphore.acquire(10_000);
    expect(permit.keys[0]).toBe(slot1);
    expect(kinds(log)).toMatchObject({ polls: PROBE_EVERY, probes: 1 });
  });

  it("a stale view the other way (the gate misses a holder's key) costs one refused fan-out, then the slot is skipped", async () => {
    const nodes = memoryNodes(3);
    vi.spyOn(Math, "random").mockReturnValue(0);
    const gate = lineGate(lineKeys("", "missed")[0], 3);
    const holders = await Promise.all(
      [0, 1].map(() => new Semaphore(new Redlock({ nodes }), "missed", 2).acquire(10_000)),
    );
    // The gate lost slot 1's key (a restart of that node alone would do the same).
    const slot1 = primitiveKey("", "semaphore", "missed", "1");
    await nodes[gate]?.command(["DEL", slot1], new AbortController().signal);
    const log: RedisArgument[][] = [];
    const semaphore = new Semaphore(await warm(nodes, log), "missed", 2);
    const waiting = semaphore.acquire(10_000, { maxAttempts: 1000 });
    await sleep(600);
    // The first try (slot 0) and one try of slot 1, refused: no more fan-outs while it is skipped.
    expect(kinds(log).sets).toBe(6);
    const slot0 = holders.find((h) => h.keys[0]?.endsWith(":0"));
    await slot0?.release();
    const permit = await waiting;
    expect(permit.keys[0]).toMatch(/:0$/);
  });
});

describe("waiting and giving up", () => {
  it("tryAcquire: null while every permit is held; a node outage is an error, not contention", async () => {
    const nodes = memoryNodes(3);
    const redlock = new Redlock({ nodes });
    const semaphore = new Semaphore(redlock, "full", 1);
    const permit = await semaphore.acquire(10_000);
    expect(await new Semaphore(new Redlock({ nodes }), "full", 1).tryAcquire(10_000)).toBeNull();
    await permit.release();
    nodes[1]?.down();
    nodes[2]?.down();
    await expect(new Semaphore(new Redlock({ nodes }), "full", 1).tryAcquire(10_000)).rejects.toMatchObject({
      code: "QUORUM_UNAVAILABLE",
    });
  });

  it("acquire: LockHeldError once maxAttempts rounds found every permit held; the signal aborts it", async () => {
    const nodes = memoryNodes(3);
    await new Semaphore(new Redlock({ nodes }), "busy", 2).acquire(10_000);
    await new Semaphore(new Redlock({ nodes }), "busy", 2).acquire(10_000);
    const semaphore = new Semaphore(new Redlock({ nodes }), "busy", 2);
    const error = await semaphore
      .acquire(10_000, { maxAttempts: 3, retryBaseDelayMs: 5, retryMaxDelayMs: 10 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    expect((error as Error).message).toBe("all 2 permits of busy are held (1 try)");
    const controller = new AbortController();
    const waiting = semaphore.acquire(10_000, { signal: controller.signal, maxAttempts: 1000 });
    setTimeout(() => controller.abort(new Error("stop")), 50);
    await expect(waiting).rejects.toMatchObject({ code: "ABORTED" });
  });

  it("stays within the request budget while waiting", async () => {
    const nodes = memoryNodes(3);
    await new Semaphore(new Redlock({ nodes }), "budget", 1).acquire(10_000);
    const log: RedisArgument[][] = [];
    const semaphore = new Semaphore(new Redlock({ nodes: nodes.map((n) => counted(n, log)) }), "budget", 1);
    await expect(
      semaphore.acquire(10_000, { requestBudget: 12, maxAttempts: 1000, retryBaseDelayMs: 1, retryMaxDelayMs: 2 }),
    ).rejects.toMatchObject({ code: "REQUEST_BUDGET" });
    expect(log.length).toBeLessThanOrEqual(12 - 3);
  });
});

describe("a permit is a Lock", () => {
  it("extends, verifies and releases its slot; using() runs the routine under it and releases", async () => {
    const nodes = memoryNodes(3);
    const redlock = new Redlock({ nodes });
    const semaphore = new Semaphore(redlock, "lock", 1);
    const permit = await semaphore.acquire(5_000);
    await permit.extend(20_000);
    for (const node of nodes) expect(node.pttl(permit.keys[0] as string)).toBeGreaterThan(15_000);
    expect((await permit.verify()).held).toBe(true);
    // The release settles with a quorum; the last node's answer is background work.
    expect((await permit.release()).released).toBeGreaterThanOrEqual(2);
    expect(permit.signal.aborted).toBe(true);
    await redlock.settled();
    for (const node of nodes) expect(node.get(permit.keys[0] as string)).toBeUndefined();
    const seen = await semaphore.using(5_000, async (signal, held) => {
      expect(signal.aborted).toBe(false);
      expect(nodes[0]?.get(held.keys[0] as string)).toBe(held.token);
      return held.keys[0];
    });
    expect(seen).toBe(permit.keys[0]);
    await redlock.settled();
    for (const node of nodes) expect(node.get(seen as string)).toBeUndefined();
  });

  it("keys live in the reserved namespace: a mutex of the same name is another key, and names never share one", async () => {
    const nodes = memoryNodes(3);
    const redlock = new Redlock({ nodes });
    const mutex = await redlock.acquire("shared-name", 5_000);
    const permit = await new Semaphore(redlock, "shared-name", 1).acquire(5_000);
    expect(permit.keys[0]).toBe("__edge-redlock__:semaphore:11:shared-name:0");
    expect(mutex.keys[0]).toBe("shared-name");
    const prefixed = await new Semaphore(redlock, "p", 1).acquire(5_000, { keyPrefix: "app:" });
    expect(prefixed.keys[0]).toBe("app:__edge-redlock__:semaphore:1:p:0");
    // "a:1" slot 2 and "a" slot "1:2" would collide without the name's length in front.
    expect(primitiveKey("", "semaphore", "a:1", "2")).not.toBe(primitiveKey("", "semaphore", "a", "1:2"));
  });

  it("refuses a bad client, name, number of permits or option", async () => {
    const redlock = new Redlock({ nodes: memoryNodes(3) });
    expect(() => new Semaphore({} as Redlock, "x", 1)).toThrow(InvalidArgumentError);
    expect(() => new Semaphore(redlock, "", 1)).toThrow(InvalidArgumentError);
    for (const permits of [0, 1.5, 257, Number.NaN]) {
      expect(() => new Semaphore(redlock, "x", permits)).toThrow(InvalidArgumentError);
    }
    const semaphore = new Semaphore(redlock, "x", 256);
    await expect(semaphore.acquire(0)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(semaphore.acquire(1000, { retryDelayMs: 5 } as never)).rejects.toThrow(/did you mean "retryDelay"/);
    await expect(semaphore.acquire(1000, { waitUntil: () => undefined } as never)).rejects.toThrow(/waitUntil/);
  });
});
