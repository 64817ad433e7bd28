/**
 * Scenarios for the waiting tests (test/unit/waiting/): clients contending for keys on in-memory
 * nodes, some with per-node jitter (clients reach the nodes in different orders), on fake time.
 */
import { expect, vi } from "vitest";
import { extendScript } from "../../../src/core/scripts/extend.js";
import { type Lock, NodeError, type RedisNode, Redlock, type RedlockOptions } from "../../../src/index.js";
import { gateIndex } from "../../../src/waiting/gate.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";
import { handOverScript } from "../../../src/waiting/scripts/hand-over.js";
import { type FakeNode, fakeClock, fakeNodes } from "./fake-node.js";
import { resolvesOnFakeTime, run } from "./fake-time.js";

/**
 * A release's requests that handed the lock on to a waiter of its isolate, as a node other than
 * the gate saw them: hand-overs (fresh keys for the next holder's own token, see src/handoff.ts).
 */
export function handedOn(log: readonly (readonly unknown[])[]): number {
  return log.filter((args) => args[0] === "EVALSHA" && args[1] === handOverScript.sha1).length;
}

/** C clients looping acquire → hold → release on one key, for `windowMs` of fake time. */
export async function hotKey(
  clients: number,
  windowMs: number,
  nodes: FakeNode[],
  options: Partial<RedlockOptions> = {},
  holdMs = 30,
) {
  const grants = new Array<number>(clients).fill(0);
  const holds: { client: number; start: number; end: number }[] = [];
  let holder: number | undefined;
  let overlaps = 0;
  let failures = 0;
  const end = Date.now() + windowMs;
  const errors: unknown[] = [];
  const loops = Array.from({ length: clients }, async (_, client) => {
    const redlock = new Redlock({ ...options, nodes, clock: fakeClock });
    while (Date.now() < end) {
      try {
        const lock = await redlock.acquire("hot", 2000);
        if (holder !== undefined) overlaps++;
        holder = client;
        const start = Date.now();
        // The nodes themselves agree: a quorum holds this grant's token.
        const holding = nodes.filter((n) => n.get("hot") === lock.token).length;
        if (holding < lock.options.quorum) overlaps++;
        await new Promise((r) => setTimeout(r, holdMs));
        holder = undefined;
        holds.push({ client, start, end: Date.now() });
        grants[client] = (grants[client] ?? 0) + 1;
        await lock.release();
      } catch (error) {
        failures++;
        errors.push(error);
      }
    }
  });
  await resolvesOnFakeTime(Promise.all(loops), windowMs + 60_000);
  const total = grants.reduce((a, b) => a + b, 0);
  const jain = total ** 2 / (clients * grants.reduce((a, b) => a + b * b, 0));
  // How often the client that just released took the lock again.
  let repeats = 0;
  for (let i = 1; i < holds.length; i++) if (holds[i]?.client === holds[i - 1]?.client) repeats++;
  return { grants, total, jain, overlaps, failures, errors, repeatShare: repeats / Math.max(1, holds.length - 1) };
}

/** Requests the nodes have received, of every kind or those `which` picks. */
export function requestsTo(nodes: FakeNode[], which: (args: readonly unknown[]) => boolean = () => true): number {
  return nodes.reduce((sum, n) => sum + n.log.filter(which).length, 0);
}

/**
 * Five nodes 20 ms away whose gate for "hot" has learned holds of 50 ms from a line of 3 clients,
 * which have left since (their kept places have run out).
 */
export async function nodesThatLearnedHolds(): Promise<FakeNode[]> {
  const nodes = fakeNodes(5);
  for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 20 };
  await hotKey(3, 1_000, nodes, {}, 50);
  await vi.advanceTimersByTimeAsync(3_000);
  return nodes;
}

/**
 * 4 clients take turns on one key with 50 ms holds; the 20th holder keeps it 3 s (extending it
 * every `extendEveryMs`, if given). Requests the others sent meanwhile, per waiter and second.
 */
export async function longHoldInLine(extendEveryMs?: number) {
  const nodes = fakeNodes(5);
  // No jitter: every take goes through the gate, so the line stays in step (a holder that won
  // without the gate is another case, tested on its own).
  for (const n of nodes) n.behaviour = { kind: "ok", latencyMs: 20 };
  const requests = () => requestsTo(nodes);
  const extensions = () => requestsTo(nodes, (args) => args[0] === "EVALSHA" && args[1] === extendScript.sha1);
  let turns = 0;
  let overlaps = 0;
  let holder = false;
  let holderRequests = 0;
  let during = { from: 0, to: 0, ms: 0 };
  const errors: unknown[] = [];
  const loops = Array.from({ length: 4 }, async () => {
    const redlock = new Redlock({ nodes, clock: fakeClock });
    while (turns < 40) {
      const lock = await redlock.acquire("long", 10_000).catch((error: unknown) => {
        errors.push(error);
        return undefined;
      });
      if (!lock) return;
      if (holder) overlaps++;
      holder = true;
      const turn = ++turns;
      const from = requests();
      const extensionsBefore = extensions();
      const start = Date.now();
      if (turn !== 20) await new Promise((r) => setTimeout(r, 50));
      else if (extendEveryMs === undefined) await new Promise((r) => setTimeout(r, 3000));
      else {
        for (let t = 0; t < 3000; t += extendEveryMs) {
          await new Promise((r) => setTimeout(r, extendEveryMs));
          await lock.extend();
        }
      }
      if (turn === 20) {
        holderRequests = extensions() - extensionsBefore;
        during = { from, to: requests() - holderRequests, ms: Date.now() - start };
      }
      holder = false;
      await lock.release();
    }
  });
  expect(await resolvesOnFakeTime(Promise.all(loops), 60_000)).toBe(true);
  const perWaiterPerSecond = (during.to - during.from) / 3 / (during.ms / 1000);
  return { errors, overlaps, turns, holderRequests, perWaiterPerSecond };
}

/** When `gate` receives each poll from now on (fake ms): filled in as the polls arrive. */
export function pollTimes(gate: FakeNode): number[] {
  const polls: number[] = [];
  const command = gate.command.bind(gate);
  gate.command = (args, signal) => {
    if (args[0] === "EVALSHA" && args[1] === gateScript.sha1) polls.push(Date.now());
    return command(args, signal);
  };
  return polls;
}

/** Five nodes that answer `latencyMs` after each request, and the gate of the key "k" among them. */
export function nodesWithGate(latencyMs: number): { nodes: FakeNode[]; gate: FakeNode } {
  const nodes = fakeNodes(5);
  for (const n of nodes) n.behaviour = { kind: "ok", latencyMs };
  return { nodes, gate: nodes[gateIndex(["k"], 5)] as FakeNode };
}

/**
 * The same nodes as another isolate sees them: other objects, so that its clients share nothing
 * with ours (see `hotResourcesFor`).
 */
export function inAnotherIsolate(nodes: readonly FakeNode[]): RedisNode[] {
  return nodes.map((node) => ({ id: node.id, command: (args, signal) => node.command(args, signal) }));
}

/**
 * `node` with its first request that `matches` failing as a dropped connection: before the node
 * sees it, or after the node applied it (`applied`, an answer lost on the way back).
 */
export function failingOnce(
  node: FakeNode,
  matches: (args: readonly unknown[]) => boolean,
  applied = false,
): { node: RedisNode; failures: () => number } {
  let failures = 0;
  const fail = () => {
    failures++;
    return new NodeError(node.id, "connection reset");
  };
  return {
    node: {
      id: node.id,
      command: async (args, signal) => {
        if (failures > 0 || !matches(args)) return node.command(args, signal);
        if (!applied) throw fail();
        await node.command(args, signal);
        throw fail();
      },
    },
    failures: () => failures,
  };
}

/**
 * Two clients of one isolate take turns on "k": A acquires it (TTL 2 s), `meanwhile` runs, B waits
 * for it (TTL `bTtlMs`) for 50 ms, and A releases it.
 */
export async function twoInTurn(
  nodes: readonly RedisNode[],
  bTtlMs = 2000,
  meanwhile?: (aLock: Lock) => Promise<unknown>,
) {
  const [a, b] = [0, 1].map(() => new Redlock({ nodes: [...nodes], clock: fakeClock })) as [Redlock, Redlock];
  const aAcquiring = a.acquire("k", 2000);
  await vi.advanceTimersByTimeAsync(20);
  const aLock = await aAcquiring;
  if (meanwhile) expect(await resolvesOnFakeTime(meanwhile(aLock), 1_000)).toBe(true);
  let bLock: Lock | undefined;
  const bTurn = b.acquire("k", bTtlMs).then((lock) => {
    bLock = lock;
  });
  await vi.advanceTimersByTimeAsync(50);
  expect(await resolvesOnFakeTime(Promise.all([aLock.release(), bTurn]), 1_000)).toBe(true);
  return { a, aLock, bLock: bLock as Lock };
}

/** One acquire and release on fake time: when the lock was granted (fake ms), after `onGrant` ran. */
export async function acquireOnFakeTime(
  redlock: Redlock,
  key: string,
  ttlMs: number,
  onGrant = () => {},
): Promise<number> {
  let acquiredAt = Number.POSITIVE_INFINITY;
  const acquiring = redlock.acquire(key, ttlMs).then(async (lock) => {
    acquiredAt = Date.now();
    onGrant();
    await lock.release();
  });
  await run(acquiring, 5, 10_000);
  return acquiredAt;
}
