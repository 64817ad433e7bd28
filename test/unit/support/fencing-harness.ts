/**
 * A deterministic simulation for the fencing property tests: clients run fenced attempts
 * (or the naive "INCR everywhere, take the max" scheme) against FakeNodes whose every message has
 * its own random delay, while nodes restart empty or silently roll back. Time is vitest's fake
 * time, and every random choice comes from one seeded generator, so a failing case replays.
 *
 * The history records, per grant, a logical timestamp taken just before the attempt started and
 * one when it returned; the checkers compare them (real-time order), never wall-clock readings.
 */
import { fanOut } from "../../../src/core/fanout.js";
import { releaseOnNode } from "../../../src/core/node-operations.js";
import { validityMs } from "../../../src/core/quorum.js";
import { randomToken } from "../../../src/core/token.js";
import { fencedAttempt } from "../../../src/fencing/attempt.js";
import { fencingKeys } from "../../../src/fencing/keys.js";
import { FakeNode, type FakeNodeSnapshot, fakeClock } from "./fake-node.js";
import { advanceUntil, timerByTimer } from "./fake-time.js";
import { seededRandom } from "./random.js";

/** One granted token. */
export interface Grant {
  readonly client: number;
  readonly fence: number;
  /** Logical time just before the attempt's first send. */
  readonly invokedAt: number;
  /** Logical time when the attempt returned the grant. */
  readonly returnedAt: number;
}

/** A node event at a fake time. */
export interface NodeEvent {
  readonly atMs: number;
  readonly node: number;
}

export interface Scenario {
  readonly nodeCount: number;
  readonly quorum: number;
  readonly clients: number;
  readonly grantsPerClient: number;
  readonly seed: number;
  /** Largest delay of one message leg, in ms. */
  readonly maxDelayMs: number;
  /** Chance that a message leg is a straggler (5x slower, often past the request deadline). */
  readonly stragglerRate: number;
  /** Chance that a request is lost (never applied, never answered). */
  readonly dropRate: number;
  /** Empty restarts (detected by the missing marker). */
  readonly restarts: readonly NodeEvent[];
  /** Silent rollbacks: the node goes back to its state `ageMs` earlier (marker kept). */
  readonly rollbacks: readonly (NodeEvent & { ageMs: number })[];
  readonly ttlMs: number;
  readonly requestTimeoutMs: number;
  readonly quarantineMs: number;
  readonly resources: readonly string[];
}

export type Protocol = "fenced" | "naive";

/** The result of one simulated run. */
export interface Run {
  readonly grants: Grant[];
  readonly attempts: number;
  readonly quarantines: number;
  readonly repairs: number;
}

/** Mark every node `ok` directly (what `initializeFencing` leaves behind). */
export function markInitialized(nodes: readonly FakeNode[], keyPrefix = ""): void {
  const keys = fencingKeys(keyPrefix);
  nodes.forEach((node, i) => {
    node.store.set(keys.incarnation, { value: `ok:${(i + 1).toString(16).padStart(8, "0")}`, expiresAt: Infinity });
  });
}

/** Run the scenario to completion in fake time (the caller has enabled fake timers). */
export async function simulate(s: Scenario, protocol: Protocol): Promise<Run> {
  const random = seededRandom(s.seed);
  const nodes = Array.from({ length: s.nodeCount }, (_, i) => new FakeNode(`n${i}`));
  markInitialized(nodes);
  const leg = () => {
    const base = random() * s.maxDelayMs;
    return Math.floor(random() < s.stragglerRate ? base * 5 + s.requestTimeoutMs / 2 : base);
  };
  for (const node of nodes) node.latency = () => ({ requestMs: leg(), replyMs: leg(), drop: random() < s.dropRate });

  for (const event of s.restarts) setTimeout(() => nodes[event.node]?.restart(), event.atMs);
  for (const event of s.rollbacks) {
    let saved: FakeNodeSnapshot | undefined;
    setTimeout(() => (saved = nodes[event.node]?.snapshot()), Math.max(0, event.atMs - event.ageMs));
    setTimeout(() => saved && nodes[event.node]?.restore(saved), event.atMs);
  }

  let logical = 0;
  const grants: Grant[] = [];
  const stats = { attempts: 0, quarantines: 0, repairs: 0 };
  const background: Promise<unknown>[] = [];
  const lockKeys = s.resources.map((r) => r);
  const drift = 0.01;
  const giveUpAt = Date.now() + 30_000;

  const release = (token: string) => {
    const fan = fanOut({
      nodeIds: nodes.map((n) => n.id),
      yes: "released",
      quorum: 1,
      timeoutMs: s.requestTimeoutMs,
      clock: fakeClock,
      task: (i, context) => releaseOnNode(nodes[i] as FakeNode, lockKeys, token, context),
    });
    background.push(fan.outcomes);
  };

  const client = async (id: number) => {
    for (let g = 0; g < s.grantsPerClient && Date.now() < giveUpAt; ) {
      stats.attempts++;
      const token = randomToken();
      const invokedAt = ++logical;
      if (protocol === "naive") {
        const fence = await naiveAttempt(nodes, s);
        const returnedAt = ++logical;
        if (fence !== undefined) {
          grants.push({ client: id, fence, invokedAt, returnedAt });
          g++;
        }
      } else {
        const result = await fencedAttempt({
          nodes,
          keyPrefix: "",
          resources: s.resources,
          token,
          ttlMs: s.ttlMs,
          quorum: s.quorum,
          requestTimeoutMs: s.requestTimeoutMs,
          quarantineMs: s.quarantineMs,
          clock: fakeClock,
        });
        const returnedAt = ++logical;
        background.push(
          result.maintenance.then((m) => {
            stats.quarantines += m.quarantined.length;
            stats.repairs += m.repaired.length;
          }),
        );
        if (result.granted) {
          // Every grant counts, even one whose validity is used up: the token's properties must
          // not depend on timing. The hold time is spent "using" the lock.
          grants.push({ client: id, fence: Number(result.fence), invokedAt, returnedAt });
          g++;
          const left = validityMs(s.ttlMs, result.startedAt, result.decidedAt, drift);
          await sleep(Math.max(0, Math.min(left, random() * 300)));
          release(token);
        } else {
          release(token);
          await result.maintenance;
        }
      }
      await sleep(Math.floor(random() * 400));
    }
  };

  const done = Promise.all(Array.from({ length: s.clients }, (_, i) => client(i))).then(() => Promise.all(background));
  let finished = false;
  void done.then(() => {
    finished = true;
  });
  if (!(await advanceUntil(() => finished, timerByTimer(200_000)))) throw new Error("simulation did not finish");
  await done;
  return { grants, ...stats };
}

/** The naive scheme: INCR the counter on every node, take the max of the first quorum of answers. */
async function naiveAttempt(nodes: readonly FakeNode[], s: Scenario): Promise<number | undefined> {
  const values: number[] = [];
  const fan = fanOut({
    nodeIds: nodes.map((n) => n.id),
    yes: "acquired",
    quorum: s.quorum,
    timeoutMs: s.requestTimeoutMs,
    clock: fakeClock,
    task: async (i, context) => {
      context.countRequest();
      const reply = await (nodes[i] as FakeNode).command(["INCR", `naive:${s.resources.join(",")}`], context.signal);
      values[i] = reply as number;
      return "acquired";
    },
  });
  const decided = await fan.decided;
  if (!decided.granted) return undefined;
  return Math.max(...decided.outcomes.flatMap((o, i) => (o.outcome === "acquired" ? [values[i] as number] : [])));
}

/** Violations of uniqueness: pairs of grants with the same fence. */
export function duplicateFences(grants: readonly Grant[]): [Grant, Grant][] {
  const byFence = new Map<number, Grant>();
  const found: [Grant, Grant][] = [];
  for (const grant of grants) {
    const other = byFence.get(grant.fence);
    if (other) found.push([other, grant]);
    else byFence.set(grant.fence, grant);
  }
  return found;
}

/** Violations of real-time monotonicity: A returned before B began, yet B's fence ≤ A's. */
export function monotonicityViolations(grants: readonly Grant[]): [Grant, Grant][] {
  const found: [Grant, Grant][] = [];
  for (const a of grants) {
    for (const b of grants) {
      if (a.returnedAt < b.invokedAt && b.fence <= a.fence) found.push([a, b]);
    }
  }
  return found;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
