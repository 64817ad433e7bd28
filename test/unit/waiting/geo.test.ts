/**
 * A hot key contended from isolates in different regions, on fake time: each isolate has its own
 * one-way time to each of 5 nodes (half the round trips of the bench's geo profile, plus seeded
 * jitter) and a critical section of two round trips to the data next to node 0. Where the gate is
 * nearer to a holder than a quorum of the nodes, a take aimed at the gate's release used to land on
 * the far nodes before the release did, and waited for the answers to asking them again: the release
 * now holds back its part for the gate until it could have reached a quorum, and the take sends each
 * node its request so that all land at the moment it lands on the gate. Checked here by the times
 * the requests reach the nodes, and by the line's pace: safe, fair, within every call's budget.
 */
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { releaseScript } from "../../../src/core/scripts/release.js";
import { type RedisArgument, type RedisNode, Redlock } from "../../../src/index.js";
import { gateIndex } from "../../../src/waiting/gate.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";
import { gateReleaseScript } from "../../../src/waiting/scripts/gate-release.js";
import { fakeClock, fakeNodes } from "../support/fake-node.js";
import { resolvesOnFakeTime, useFakeTime } from "../support/fake-time.js";
import { type Hold, jainOf, meanHandoffMs, overlaps } from "../support/holds.js";
import { seededRandom } from "../support/random.js";

useFakeTime();

/**
 * Round trips in ms from each isolate (us-east-1, eu-west-1, us-west-2, eu-central-1) to each node
 * (us-east-1, eu-west-1, us-west-2, eu-central-1, us-west-1): the bench's geo profile
 * (tools/bench/isolate-latency.ts), 4 ms within a region.
 */
const RTT_MS = [
  [4, 80.55, 86.98, 88.66, 72.74],
  [80.52, 4, 137, 19.56, 153.2],
  [88.68, 137, 4, 159.5, 19.2],
  [88.62, 19.55, 159.5, 4, 166.6],
];
/** Round trip from each isolate to the data its critical section reads and writes (next to node 0). */
const DATA_RTT_MS = [4, 80.52, 88.68, 88.62];
const JITTER_MS = 2;
const WINDOW_MS = 30_000;
const KEY = "geo";

/** One request an isolate sent: to which node, what it was, when it left and when it reached the node. */
interface Sent {
  readonly isolate: number;
  readonly node: number;
  readonly kind: "set" | "aim" | "release" | "gate-release" | "other";
  /** The lock token a `SET` or an aimed take sends (one per attempt). */
  readonly token?: string;
  readonly sent: number;
  readonly landed: number;
}

/**
 * The aimed takes whose requests left at different times (more than `staggerMs` apart): each as
 * the times its requests reached their nodes (a node asked again counts once, by its first
 * request). A take is its gate request in `aim` mode and the `SET`s with the same token.
 */
function staggeredTakes(requests: readonly Sent[], staggerMs: number): number[][] {
  const takes: number[][] = [];
  const seen = new Set<string | undefined>();
  for (const aim of requests.filter((r) => r.kind === "aim")) {
    // A take that landed early may ask the gate again: its first request is the one aimed.
    if (seen.has(aim.token)) continue;
    seen.add(aim.token);
    const parts = [aim];
    for (const r of requests)
      if (r.kind === "set" && r.token === aim.token && !parts.some((p) => p.node === r.node)) parts.push(r);
    const sent = parts.map((r) => r.sent);
    if (parts.length > 1 && Math.max(...sent) - Math.min(...sent) > staggerMs) takes.push(parts.map((r) => r.landed));
  }
  return takes;
}

/**
 * Releases by one isolate (each as when release() was called and when it resolved): when the
 * gate's part left and reached the gate, and when each other node's part reached its node.
 */
function releases(
  requests: readonly Sent[],
  isolate: number,
  calls: readonly { called: number; resolved: number }[],
): { gate: number; gateSent: number; resolved: number; others: number[] }[] {
  return calls.flatMap(({ called, resolved }) => {
    const parts = requests.filter((r) => r.isolate === isolate && r.sent >= called && r.sent <= called + 200);
    const gate = parts.find((r) => r.kind === "gate-release");
    const others = parts.filter((r) => r.kind === "release" && r.sent === called).map((r) => r.landed);
    return gate === undefined || others.length === 0
      ? []
      : [{ gate: gate.landed, gateSent: gate.sent, resolved, others }];
  });
}

/**
 * Isolates in RTT_MS's regions loop acquire → critical section → release on KEY for WINDOW_MS of
 * fake time, with jitter and the library's own draws from seeds of `seed`: the sections held, the
 * requests each call's isolate sent, the calls that failed, every request, and each isolate's
 * release calls.
 */
async function geoRun(seed: number) {
  const random = seededRandom(seed);
  // The library's own draws (the spread of a far-back waiter's sleep, backoff jitter) from a
  // seeded stream too: the run, and the figures it prints, repeat exactly.
  const draws = vi.spyOn(Math, "random").mockImplementation(seededRandom(1));
  onTestFinished(() => draws.mockRestore());
  const nodes = fakeNodes(5);
  // The gate is node 1 (eu-west-1): the isolates in eu-west-1 and eu-central-1 are nearer to it
  // than to a quorum of the nodes, and their releases are the ones held back below.
  expect(gateIndex([KEY], 5)).toBe(1);
  const isolates = RTT_MS.length;
  const sent = new Array<number>(isolates).fill(0);
  const requests: Sent[] = [];
  const isolate = (k: number): RedisNode[] =>
    nodes.map((node, i) => ({
      id: node.id,
      async command(args: readonly RedisArgument[], signal: AbortSignal) {
        sent[k] = (sent[k] ?? 0) + 1;
        const oneWay = (RTT_MS[k]?.[i] as number) / 2;
        const at = Date.now();
        await new Promise((r) => setTimeout(r, oneWay + JITTER_MS * random()));
        const kind = kindOf(args);
        const token = kind === "set" ? args[2] : kind === "aim" ? args[5 + Number(args[2])] : undefined;
        requests.push({ isolate: k, node: i, kind, token: String(token), sent: at, landed: Date.now() });
        const reply = await node.command(args, signal);
        await new Promise((r) => setTimeout(r, oneWay + JITTER_MS * random()));
        return reply;
      },
    }));
  const holds: Hold[] = [];
  const releaseCalls: { called: number; resolved: number }[][] = RTT_MS.map(() => []);
  const perCall: number[] = [];
  const failures: unknown[] = [];
  const end = Date.now() + WINDOW_MS;
  const loops = Array.from({ length: isolates }, async (_, k) => {
    await new Promise((r) => setTimeout(r, 13 * k));
    const redlock = new Redlock({ nodes: isolate(k), clock: fakeClock });
    while (Date.now() < end) {
      const before = sent[k] as number;
      try {
        const lock = await redlock.acquire(KEY, 5000);
        const start = Date.now();
        await new Promise((r) => setTimeout(r, 2 * (DATA_RTT_MS[k] as number)));
        holds.push({ isolate: k, start, end: Date.now() });
        const called = Date.now();
        await lock.release();
        releaseCalls[k]?.push({ called, resolved: Date.now() });
      } catch (error) {
        failures.push(error);
      }
      perCall.push((sent[k] as number) - before);
    }
  });
  expect(await resolvesOnFakeTime(Promise.all(loops), WINDOW_MS + 60_000)).toBe(true);
  holds.sort((a, b) => a.start - b.start);
  return { holds, perCall, failures, requests, releaseCalls, isolates };
}

describe("a hot key across isolates in different regions", () => {
  it("releases free the gate after a quorum, takes land on every node at once, safe, fair and within the budget", async ({
    annotate,
  }) => {
    const { holds, perCall, failures, requests, releaseCalls, isolates } = await geoRun(11);
    // The figures docs/benchmarks.md quotes, shown by `--reporter=verbose` whatever the checks say.
    await annotate(
      `${holds.length} sections, mean handoff ${meanHandoffMs(holds)} ms, ` +
        `at most ${Math.max(...perCall)} requests in a call, ${failures.length} calls failed`,
    );
    expect(failures).toEqual([]);
    expect(overlaps(holds)).toBe(0);
    const jain = jainOf(holds, isolates);
    expect(jain).toBeGreaterThanOrEqual(0.8);
    // Each call, its release included, within the Workers Free plan's 50 subrequests (counted
    // here as everything its isolate sent meanwhile, background work of earlier calls included).
    expect(Math.max(...perCall)).toBeLessThanOrEqual(50);

    // A release from where the gate is nearer than a quorum (eu-west-1 and eu-central-1, the gate
    // being node 1) frees the gate no sooner than a quorum of the other nodes has its release.
    const quorum = 3;
    let heldBack = 0;
    for (let k = 0; k < isolates; k++) {
      // Once its isolate has heard from every node: from its second release on.
      for (const release of releases(
        requests,
        k,
        (releaseCalls[k] as { called: number; resolved: number }[]).slice(2),
      )) {
        const quorumFree = [...release.others, release.gate].sort((a, b) => a - b)[quorum - 1] as number;
        expect(release.gate).toBeGreaterThanOrEqual(quorumFree - 2 * JITTER_MS);
        // Held back, the gate's part has still left before release() resolved: a Worker that
        // answers its request right after `await lock.release()` does not end before it.
        expect(release.gateSent).toBeLessThanOrEqual(release.resolved);
        if (k === 1 || k === 3) heldBack++;
      }
    }
    expect(heldBack).toBeGreaterThanOrEqual(20);
    // A take aimed at a release lands on every node at once (within the jitter), though its
    // requests left up to 80 ms apart.
    const takes = staggeredTakes(requests, 10);
    expect(takes.length).toBeGreaterThanOrEqual(20);
    for (const landed of takes)
      expect(Math.max(...landed) - Math.min(...landed)).toBeLessThanOrEqual(2 * JITTER_MS + 1);
  });

  it("the line keeps its pace: a mean of 108 sections or more over seeds 11–18", async ({ annotate }) => {
    // 30 s of sections of 8–177 ms, each handoff at least a round trip to a quorum (71–100 ms).
    // One seed's count moves by a few sections with any change to the line's first turns (the
    // order of regions it settles in): the floor is on the mean of eight seeds, each safe and
    // within the budget. Figures per seed: `--reporter=verbose`, and docs/benchmarks.md.
    const counts: number[] = [];
    for (let seed = 11; seed <= 18; seed++) {
      const { holds, perCall, failures } = await geoRun(seed);
      expect(failures, `seed ${seed}`).toEqual([]);
      expect(overlaps(holds), `seed ${seed}`).toBe(0);
      expect(Math.max(...perCall), `seed ${seed}`).toBeLessThanOrEqual(50);
      counts.push(holds.length);
      await annotate(`seed ${seed}: ${holds.length} sections, mean handoff ${meanHandoffMs(holds)} ms`);
    }
    expect(counts.reduce((a, b) => a + b, 0) / counts.length).toBeGreaterThanOrEqual(108);
  });
});

function kindOf(args: readonly RedisArgument[]): Sent["kind"] {
  if (args[0] === "SET") return "set";
  if (args[0] !== "EVALSHA") return "other";
  if (args[1] === gateReleaseScript.sha1) return "gate-release";
  if (args[1] === releaseScript.sha1) return "release";
  if (args[1] === gateScript.sha1 && args[4 + Number(args[2])] === "aim") return "aim";
  return "other";
}
