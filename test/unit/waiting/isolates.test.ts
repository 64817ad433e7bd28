/**
 * A hot key contended from separate isolates (each client with its own RedisNode objects, so
 * nothing of an isolate's state is shared), on fake time: 8 isolates 10 ms (one way, plus seeded
 * exponential jitter) from 5 nodes, 40 ms critical sections. The line must stay safe (one holder
 * at a time, by the callers' own history and by the nodes' keys), fair, within every call's request
 * budget and the poll rate bounds, and keep the lock moving.
 */
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { type RedisArgument, type RedisNode, Redlock } from "../../../src/index.js";
import { gateIndex } from "../../../src/waiting/gate.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";
import { fakeClock, fakeNodes } from "../support/fake-node.js";
import { resolvesOnFakeTime, useFakeTime } from "../support/fake-time.js";
import { type Hold, jainOf, meanHandoffMs, overlaps } from "../support/holds.js";
import { seededRandom } from "../support/random.js";

useFakeTime();

const ISOLATES = 8;
const ONE_WAY_MS = 10;
const JITTER_MS = 3;
const CRITICAL_MS = 40;
const WINDOW_MS = 10_000;

/** The most of `times` that fall in any window of a second. */
function densestSecond(times: readonly number[]): number {
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (j < times.length && (times[j] as number) < (times[i] as number) + 1000) j++;
    most = Math.max(most, j - i);
  }
  return most;
}

describe("a hot key across separate isolates", () => {
  it("one holder at a time, every isolate served fairly, each call within its budget and 10 polls a second", async ({
    annotate,
  }) => {
    const random = seededRandom(7);
    // The library's own draws (the spread of a far-back waiter's sleep, backoff jitter) from a
    // seeded stream too: the run, and the figures it prints, repeat exactly.
    const draws = vi.spyOn(Math, "random").mockImplementation(seededRandom(1));
    onTestFinished(() => draws.mockRestore());
    const nodes = fakeNodes(5);
    const gate = gateIndex(["hot"], 5);
    const oneWay = () => ONE_WAY_MS - JITTER_MS * Math.log(1 - random());
    const polls: number[][] = Array.from({ length: ISOLATES }, () => []);
    const sent = new Array<number>(ISOLATES).fill(0);
    const isolate = (k: number): RedisNode[] =>
      nodes.map((node, i) => ({
        id: node.id,
        async command(args: readonly RedisArgument[], signal: AbortSignal) {
          sent[k] = (sent[k] ?? 0) + 1;
          // A poll: a gate request that asks for a place or takes a free lock (an aimed take is an
          // attempt, and leaving the line is not a look).
          const mode = args[0] === "EVALSHA" && args[1] === gateScript.sha1 ? args[4 + Number(args[2])] : undefined;
          if (i === gate && (mode === "take" || mode === "wait")) polls[k]?.push(Date.now());
          await new Promise((r) => setTimeout(r, oneWay()));
          const reply = await node.command(args, signal);
          await new Promise((r) => setTimeout(r, oneWay()));
          return reply;
        },
      }));
    const holds: Hold[] = [];
    const perCall: number[] = [];
    let notOnQuorum = 0;
    const failures: unknown[] = [];
    const end = Date.now() + WINDOW_MS;
    const loops = Array.from({ length: ISOLATES }, async (_, k) => {
      await new Promise((r) => setTimeout(r, 7 * k));
      const redlock = new Redlock({ nodes: isolate(k), clock: fakeClock });
      while (Date.now() < end) {
        const before = sent[k] as number;
        try {
          const lock = await redlock.acquire("hot", 2000);
          // The nodes agree: a quorum of them holds this grant's own token.
          if (nodes.filter((n) => n.get(lock.keys[0] as string) === lock.token).length < lock.options.quorum)
            notOnQuorum++;
          const start = Date.now();
          await new Promise((r) => setTimeout(r, CRITICAL_MS));
          holds.push({ isolate: k, start, end: Date.now() });
          await lock.release();
        } catch (error) {
          failures.push(error);
        }
        perCall.push((sent[k] as number) - before);
      }
    });
    expect(await resolvesOnFakeTime(Promise.all(loops), WINDOW_MS + 60_000)).toBe(true);
    holds.sort((a, b) => a.start - b.start);
    // Its pace, shown by `--reporter=verbose` whatever the checks say (docs/waiting.md quotes it).
    await annotate(`${holds.length} sections, mean handoff ${meanHandoffMs(holds)} ms`);
    expect(failures).toEqual([]);
    expect(overlaps(holds)).toBe(0);
    expect(notOnQuorum).toBe(0);
    // The lock keeps moving: a handoff costs at least a critical section and a round trip (60 ms,
    // 166 in 10 s); a line that lost its turns would grant far fewer.
    expect(holds.length).toBeGreaterThanOrEqual(100);
    const jain = jainOf(holds, ISOLATES);
    expect(jain).toBeGreaterThanOrEqual(0.9);
    // Each call, its release included, within the default request budget of 40.
    expect(Math.max(...perCall)).toBeLessThanOrEqual(40);
    for (const times of polls) expect(densestSecond(times)).toBeLessThanOrEqual(10);
  });

  it("the checks catch an overlap and a burst of polls (negative controls)", () => {
    expect(
      overlaps([
        { isolate: 0, start: 0, end: 50 },
        { isolate: 1, start: 49, end: 90 },
      ]),
    ).toBe(1);
    expect(densestSecond(Array.from({ length: 11 }, (_, i) => 99 * i))).toBe(11);
  });
});
