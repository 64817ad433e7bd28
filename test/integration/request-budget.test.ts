/**
 * What one `acquire()` may cost (issue 29), counted through each client's own `fetch` against real
 * nodes, every client an isolate of its own:
 * - no call sends more than `requestBudget` requests (its lock's release included), behind a long
 *   hold or among 16 waiters on one key;
 * - a waiter polls the gate at most 10 times a second, and at most twice a second more than 6
 *   turns back, from the line's first contention on (no hold recorded yet);
 * - a custom `retryDelay` still waits in line (polls of one node, not fan-outs at its pace);
 * - fenced acquisitions wait in line too, so that callers on one key, in one isolate or many,
 *   are all served within the budget, with fences that increase in grant order.
 */
import { describe, expect, it } from "vitest";
import { fencing, initializeFencing } from "../../src/fencing/index.js";
import { fenceAcquireScript } from "../../src/fencing/scripts/fence-acquire.js";
import { LockHeldError, Redlock, type RedlockOptions } from "../../src/index.js";
import { gateScript } from "../../src/waiting/scripts/gate.js";
import { gateReleaseScript } from "../../src/waiting/scripts/gate-release.js";
import { foreignClient, sleep } from "./support/isolates.js";
import { type Endpoint, uniqueKey } from "./support/nodes.js";
import { useOwnCluster } from "./support/own-cluster.js";

const nodesOf = useOwnCluster();
const endpoints = (): Endpoint[] => nodesOf().nodes.map(({ url, token }) => ({ url, token }));

/**
 * One request a client sent: when, what, and when answered. For a request to the gate, the place
 * in line it was told and its ticket; for a release through the gate, the ticket of the waiter
 * that the release left first in line (`head`, 0 for none).
 */
interface Sent {
  readonly at: number;
  readonly args: readonly unknown[];
  rank?: number;
  ticket?: number;
  head?: number;
  answeredAt?: number;
  /** The node did not know the script yet: the client sends the same request again as `EVAL`. */
  noScript?: boolean;
}

/**
 * A client of its own isolate whose every request is recorded. The state an isolate's clients
 * share (the line's wake-ups, hand-overs, the cluster check) is keyed by the clock object: a clock
 * of its own makes the client an isolate of its own. With `sharedIsolate`, it shares the default
 * clock, as callers of one isolate do.
 */
function countingClient(options: RedlockOptions = {}, sharedIsolate = false): { redlock: Redlock; sent: Sent[] } {
  const sent: Sent[] = [];
  const counting: typeof fetch = async (input, init) => {
    const entry: Sent = { at: performance.now(), args: JSON.parse(String(init?.body)) as unknown[] };
    sent.push(entry);
    const response = await fetch(input, init);
    const gate = pollMode(entry.args) !== undefined;
    if (gate || runs(entry.args, gateReleaseScript)) {
      const body = (await response.clone().json()) as { result?: unknown; error?: unknown };
      if (typeof body.error === "string" && body.error.startsWith("NOSCRIPT")) entry.noScript = true;
      if (Array.isArray(body.result)) {
        entry.answeredAt = performance.now();
        if (gate) {
          entry.rank = body.result[1] as number;
          entry.ticket = body.result[5] as number;
        } else entry.head = body.result[8] as number;
      }
    }
    return response;
  };
  const nodes = endpoints().map((e) => ({ ...e, fetch: counting }));
  const clock = sharedIsolate ? {} : { clock: { now: () => performance.now() } };
  return { redlock: new Redlock({ nodes, ...clock, ...options }), sent };
}

/** Whether a request runs `script` (`EVALSHA sha1` or `EVAL source`). */
function runs(args: readonly unknown[], script: { sha1: string; source: string }): boolean {
  const [command, body] = args;
  return (command === "EVALSHA" && body === script.sha1) || (command === "EVAL" && body === script.source);
}

/** The mode of a request to the gate script (`take`, `wait`, `aim`, `leave`), or undefined for any other request. */
function pollMode(args: readonly unknown[]): string | undefined {
  return runs(args, gateScript) ? (args[4 + (args[2] as number)] as string) : undefined;
}

/**
 * The polls among `sent`: gate requests that only ask for a place or take a free lock (an aimed
 * take is an attempt). A poll that a node answered `NOSCRIPT` and its `EVAL` after it are one
 * poll, sent when its first request was.
 */
function polls(sent: readonly Sent[]): Sent[] {
  const found: Sent[] = [];
  let unknownScript: Sent | undefined;
  for (const s of sent) {
    const mode = pollMode(s.args);
    if (mode !== "take" && mode !== "wait") continue;
    if (s.noScript) {
      unknownScript = s;
      continue;
    }
    const again = unknownScript !== undefined && pollToken(unknownScript.args) === pollToken(s.args);
    found.push(again ? { ...s, at: (unknownScript as Sent).at } : s);
    unknownScript = undefined;
  }
  return found;
}

/** The token of a request to the gate script. */
function pollToken(args: readonly unknown[]): unknown {
  return args[5 + (args[2] as number)];
}

/**
 * The pace far back: every poll among `sent` sent while the waiter stood more than `turns` turns
 * back (`checked`), and those that came less than `gapMs` (less the stamps' slack) after the poll
 * before them (`tooSoon`, as text). Where it stood is the last place in line it learned before the
 * poll was sent: from a gate answer of its own (an aimed take's included: a waiter that a release
 * of its isolate told its turn aims a take at once), or first in line when a release of its
 * isolate (`releases`, of every client there) left its ticket at the head of the line: the
 * isolate tells it its turn without a poll, and its next poll comes as the first in line's.
 */
function farBackPace(
  sent: readonly Sent[],
  turns: number,
  gapMs: number,
  releases: readonly Sent[] = [],
): { checked: number; tooSoon: string[] } {
  const answers = sent.filter((s) => s.rank !== undefined && s.answeredAt !== undefined);
  const mine = polls(sent);
  let checked = 0;
  const tooSoon: string[] = [];
  for (let i = 1; i < mine.length; i++) {
    const previous = mine[i - 1] as Sent;
    const next = mine[i] as Sent;
    const known = answers.filter((a) => (a.answeredAt as number) <= next.at).at(-1);
    if (known === undefined || (known.rank as number) <= turns) continue;
    const toldFirst = releases.some(
      (r) =>
        r.head === known.ticket &&
        (r.answeredAt as number) > (known.answeredAt as number) &&
        (r.answeredAt as number) <= next.at,
    );
    if (toldFirst) continue;
    checked++;
    if (next.at - previous.at < gapMs - STAMP_SLACK_MS) {
      tooSoon.push(`${Math.round(next.at - previous.at)} ms after a poll, ${known.rank} turns back`);
    }
  }
  return { checked, tooSoon };
}

/**
 * Between the library reading its clock for a poll and this file's `fetch` stamping it, a few
 * async hops pass (the fan-out, the script runner, the transport): up to a few ms on a loaded
 * machine. The checks below allow that much, and no more.
 */
const STAMP_SLACK_MS = 5;

/** The most of `times` within any window of `windowMs` (half-open, less the stamps' slack). */
function mostInWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while ((sorted[i] as number) - (sorted[j] as number) >= windowMs - STAMP_SLACK_MS) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe("the checkers", () => {
  it("negative control: the window count sees 11 polls 95 ms apart within a second", () => {
    const times = Array.from({ length: 11 }, (_, i) => i * 95);
    expect(mostInWindow(times, 1000)).toBe(11);
    expect(mostInWindow([0, 100, 200], 1000)).toBe(3);
    expect(mostInWindow([0, 1000, 2000], 1000)).toBe(1);
  });

  it("negative control: a poll answered NOSCRIPT and its EVAL are one poll, sent at the first; other polls stay apart", () => {
    const gateArgs = (command: string, token: string) => [command, gateScript.sha1, 1, "k", "-", "take", token];
    const sent: Sent[] = [
      { at: 0, args: gateArgs("EVALSHA", "a"), noScript: true },
      { at: 90, args: gateArgs("EVALSHA", "a") },
      { at: 200, args: gateArgs("EVALSHA", "b"), noScript: true },
      { at: 300, args: gateArgs("EVALSHA", "c") },
    ];
    expect(polls(sent).map((s) => s.at)).toEqual([0, 300]);
  });

  it("negative control: the far-back pace sees a poll 300 ms after one 8 turns back, and not after an aim put it second", () => {
    const take = (at: number, rank: number, mode = "take"): Sent => ({
      at,
      args: ["EVALSHA", gateScript.sha1, 1, "k", "-", mode],
      rank,
      ticket: 7,
      answeredAt: at + 20,
    });
    const release = (at: number, head: number): Sent => ({
      at,
      args: ["EVALSHA", gateReleaseScript.sha1],
      head,
      answeredAt: at + 20,
    });
    expect(farBackPace([take(0, 8), take(300, 7)], 6, 500)).toEqual({
      checked: 1,
      tooSoon: ["300 ms after a poll, 8 turns back"],
    });
    expect(farBackPace([take(0, 8), take(600, 7)], 6, 500)).toEqual({ checked: 1, tooSoon: [] });
    expect(farBackPace([take(0, 8), take(200, 1, "aim"), take(300, 1)], 6, 500)).toEqual({ checked: 0, tooSoon: [] });
    // A release of the isolate that left it first in line, and one that left another waiter there.
    expect(farBackPace([take(0, 8), take(300, 7)], 6, 500, [release(200, 7)])).toEqual({ checked: 0, tooSoon: [] });
    expect(farBackPace([take(0, 8), take(300, 7)], 6, 500, [release(200, 9)])).toEqual({
      checked: 1,
      tooSoon: ["300 ms after a poll, 8 turns back"],
    });
  });
});

describe("requests of one acquire()", () => {
  it("behind a 30 s hold: within the budget, at most 10 polls a second, then LockHeldError", async () => {
    for (let i = 0; i < 5; i++) nodesOf().setDelay(i, 5);
    const key = uniqueKey("budget-long-hold");
    const holder = await foreignClient(endpoints()).acquire(key, 30_000);
    try {
      const { redlock, sent } = countingClient();
      const error = await redlock.acquire(key, 5000).then(
        (lock) => lock.release().then(() => new Error("acquired a held lock")),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(LockHeldError);
      expect(sent.length).toBeLessThanOrEqual(40);
      const times = polls(sent).map((s) => s.at);
      expect(times.length, "it waited by polling").toBeGreaterThan(5);
      expect(mostInWindow(times, 1000)).toBeLessThanOrEqual(10);
    } finally {
      await holder.release();
    }
  }, 60_000);

  it.each([
    ["16 isolates", false],
    ["16 callers of one isolate", true],
  ])(
    "%s on one key: every call within the budget, polls paced by place in line, no overlap",
    async (_, sharedIsolate) => {
      for (let i = 0; i < 5; i++) nodesOf().setDelay(i, 5);
      const key = uniqueKey("budget-16");
      let holders = 0;
      let overlaps = 0;
      let granted = 0;
      const clients = Array.from({ length: 16 }, () => countingClient({}, sharedIsolate));
      // One call each, all at once: a call's requests are everything its client sent from the call
      // until it returned (its background work included), and its lock's release.
      const perCall = await Promise.all(
        clients.map(async ({ redlock, sent }) => {
          const lock = await redlock.acquire(key, 10_000).catch((error: unknown) => {
            // Giving up after the patience is allowed; the requests it sent still count.
            if (error instanceof LockHeldError) return undefined;
            throw error;
          });
          const untilReturned = sent.length;
          if (!lock) return untilReturned;
          granted++;
          if (++holders > 1) overlaps++;
          await sleep(30);
          holders--;
          const released = await lock.release();
          return untilReturned + released.report.requests;
        }),
      );
      expect(overlaps).toBe(0);
      expect(granted, "calls granted").toBeGreaterThanOrEqual(12);
      expect(Math.max(...perCall), "requests of the costliest call").toBeLessThanOrEqual(40);
      let farBack = 0;
      const tooSoon: string[] = [];
      // What a release through the gate told the isolate it was sent from (see `farBackPace`).
      const releases = sharedIsolate ? clients.flatMap(({ sent }) => sent.filter((s) => s.head !== undefined)) : [];
      for (const { sent } of clients) {
        const mine = polls(sent);
        expect(
          mostInWindow(
            mine.map((s) => s.at),
            1000,
          ),
        ).toBeLessThanOrEqual(10);
        // More than 6 turns back: the next poll no sooner than half a second later, unless the
        // waiter learned a nearer place meanwhile (see `farBackPace`).
        const pace = farBackPace(sent, 6, 500, releases);
        tooSoon.push(...pace.tooSoon);
        farBack += pace.checked;
      }
      expect(tooSoon).toEqual([]);
      // The pace far back was checked at all: 16 waiters at once put some more than 6 turns back.
      expect(farBack, "polls sent more than 6 turns back").toBeGreaterThan(0);
    },
    60_000,
  );

  it("a custom retryDelay still waits in line: polls of the gate, not a fan-out every 100 ms", async () => {
    for (let i = 0; i < 5; i++) nodesOf().setDelay(i, 5);
    const key = uniqueKey("budget-retry-delay");
    const holder = await foreignClient(endpoints()).acquire(key, 5000);
    const { redlock, sent } = countingClient({ retryDelay: () => 100, maxAttempts: 40 });
    const releasing = sleep(1500).then(() => holder.release());
    const lock = await redlock.acquire(key, 2000);
    await releasing;
    await lock.release();
    const setNx = sent.filter((s) => s.args[0] === "SET").length;
    expect(polls(sent).length, "it polled the gate").toBeGreaterThan(0);
    // A fan-out every 100 ms for 1.5 s would be 15 of them, 75 SET NX requests on 5 nodes.
    expect(setNx, "SET NX requests (4 per fan-out besides the gate)").toBeLessThanOrEqual(3 * 5);
    expect(sent.length).toBeLessThanOrEqual(40);
  }, 30_000);

  it("fenced, 16 isolates on one key: every call granted within the budget, fences increase in grant order", async () => {
    for (let i = 0; i < 5; i++) nodesOf().setDelay(i, 5);
    const keyPrefix = `${uniqueKey("budget-fenced-16")}:`;
    const clients = Array.from({ length: 16 }, () => countingClient({ keyPrefix, fencing }));
    await initializeFencing((clients[0] as { redlock: Redlock }).redlock);
    for (const { sent } of clients) sent.length = 0;
    const grants: { order: number; fence: bigint }[] = [];
    let holders = 0;
    let overlaps = 0;
    const perCall = await Promise.all(
      clients.map(async ({ redlock, sent }) => {
        const lock = await redlock.acquire("r", 10_000);
        const untilReturned = sent.length;
        if (++holders > 1) overlaps++;
        grants.push({ order: grants.length, fence: BigInt(lock.fence ?? "-1") });
        await sleep(30);
        holders--;
        const released = await lock.release();
        return untilReturned + released.report.requests;
      }),
    );
    expect(overlaps).toBe(0);
    expect(grants).toHaveLength(16);
    for (let i = 1; i < grants.length; i++) {
      expect((grants[i] as { fence: bigint }).fence).toBeGreaterThan((grants[i - 1] as { fence: bigint }).fence);
    }
    expect(Math.max(...perCall), "requests of the costliest call").toBeLessThanOrEqual(40);
    for (const { sent } of clients)
      expect(
        mostInWindow(
          polls(sent).map((s) => s.at),
          1000,
        ),
      ).toBeLessThanOrEqual(10);
    // Waiting in line: after its first fan-out, a call fans out when its turn comes, not at a
    // backoff's pace. 16 calls that fanned out in turn send well under 16 × 4 fan-outs.
    const fanOuts = clients.reduce((n, { sent }) => n + sent.filter((s) => isFenceAcquire(s.args)).length / 5, 0);
    expect(fanOuts, "fenced fan-outs of all 16 calls").toBeLessThan(16 * 3);
  }, 60_000);

  it("fenced, 20 callers of one client on one key: all granted within the budget", async () => {
    const keyPrefix = `${uniqueKey("budget-fenced-one")}:`;
    const { redlock } = countingClient({ keyPrefix, fencing });
    await initializeFencing(redlock);
    for (let round = 0; round < 2; round++) {
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, async () => {
          const lock = await redlock.acquire(`counter:${round}`, 10_000);
          await sleep(8);
          await lock.release();
        }),
      );
      const failed = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
      expect(failed, `round ${round}`).toEqual([]);
    }
  }, 60_000);
});

/** Whether a request is phase 1 of a fenced attempt on one node (`fence-acquire`). */
function isFenceAcquire(args: readonly unknown[]): boolean {
  return (
    (args[0] === "EVALSHA" && args[1] === fenceAcquireScript.sha1) ||
    (args[0] === "EVAL" && args[1] === fenceAcquireScript.source)
  );
}
