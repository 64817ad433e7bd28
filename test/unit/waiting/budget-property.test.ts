/**
 * `requestBudget` as a property: whatever the isolates, latencies, holds, budget, fencing and a
 * failing or hanging node, no `acquire()` call sends more than its budget from its start until it
 * returns, plus its lock's release (see `budget-count.ts`). Counted where the requests leave each
 * isolate, on fake time, over seeded scenarios; each isolate waits for its background work
 * (`settled()`) between calls, so that no call is charged with an earlier one's.
 */
import { describe, expect, it } from "vitest";
import { fencing, initializeFencing } from "../../../src/fencing/index.js";
import { type Lock, Redlock, RequestBudgetError } from "../../../src/index.js";
import { type Behaviour, fakeClock, fakeNodes, isolateView } from "../support/fake-node.js";
import { settle, timerByTimer, useFakeTime } from "../support/fake-time.js";
import { seededRandom } from "../support/random.js";

useFakeTime();

const NODES = 5;

interface Call {
  readonly counted: number;
  readonly budget: number;
  readonly granted: boolean;
  readonly error?: unknown;
}

/**
 * One seeded scenario: every call it made, with what the budget counts of it. `unbounded`: the
 * clients get no budget, the calls are still checked against the one drawn (a negative control).
 */
async function scenario(seed: number, unbounded = false): Promise<{ calls: Call[]; label: string }> {
  const random = seededRandom(seed);
  const pick = (from: number, to: number) => from + Math.floor(random() * (to - from + 1));
  const nodes = fakeNodes(NODES);
  const faulty = random() < 0.4 ? pick(0, NODES - 1) : -1;
  const fault: Behaviour = random() < 0.5 ? { kind: "error", latencyMs: 2 } : { kind: "hang" };
  for (const [i, node] of nodes.entries()) {
    node.behaviour = i === faulty ? fault : { kind: "ok", latencyMs: 1, jitterMs: pick(0, 10) };
  }
  const fenced = random() < 0.3;
  const isolates = pick(2, 8);
  const callsEach = pick(1, 3);
  const budget = pick(2 * NODES + 2, 50);
  const ttlMs = pick(1, 5) * 1000;
  const holdMs = pick(5, 200);
  const label = `seed ${seed}: ${isolates} isolates × ${callsEach}, budget ${budget}, ttl ${ttlMs}, hold ${holdMs}${fenced ? ", fenced" : ""}${faulty >= 0 ? `, node ${faulty} ${fault.kind}` : ""}`;
  const calls: Call[] = [];
  const runIsolate = async () => {
    const oneWay = Array.from({ length: NODES }, () => pick(1, 40));
    let counting = false;
    let counted = 0;
    const view = isolateView(
      nodes,
      (i) => oneWay[i] as number,
      () => {
        if (counting) counted++;
      },
    );
    const redlock = new Redlock({
      nodes: view,
      clock: fakeClock,
      requestBudget: unbounded ? Number.POSITIVE_INFINITY : budget,
      keyPrefix: `s${seed}:`,
      ...(fenced ? { fencing } : {}),
    });
    for (let c = 0; c < callsEach; c++) {
      counting = true;
      counted = 0;
      let lock: Lock | undefined;
      let error: unknown;
      try {
        lock = await redlock.acquire("hot", ttlMs);
      } catch (e) {
        error = e;
      }
      counting = false;
      if (lock) {
        await new Promise((resolve) => setTimeout(resolve, holdMs));
        counted += (await lock.release().catch(() => ({ report: { requests: NODES } }))).report.requests;
      }
      calls.push({ counted, budget, granted: lock !== undefined, error });
      await redlock.settled();
    }
  };
  const work = async () => {
    if (fenced) {
      const init = new Redlock({ nodes, clock: fakeClock, keyPrefix: `s${seed}:`, fencing });
      await initializeFencing(init).catch(() => undefined);
    }
    await Promise.all(Array.from({ length: isolates }, runIsolate));
  };
  await settle(work(), timerByTimer(2_000_000));
  return { calls, label };
}

describe("requestBudget, over seeded scenarios", () => {
  it("no call and its release sends more than its budget", { timeout: 120_000 }, async () => {
    const over: string[] = [];
    let calls = 0;
    let granted = 0;
    let nearTheBudget = 0;
    let budgetErrors = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const result = await scenario(seed);
      for (const call of result.calls) {
        calls++;
        if (call.granted) granted++;
        if (call.error instanceof RequestBudgetError) budgetErrors++;
        if (call.counted > call.budget) over.push(`${result.label}: ${call.counted} requests`);
        if (call.counted >= call.budget - NODES) nearTheBudget++;
      }
    }
    expect(over).toEqual([]);
    // Not vacuous: most calls were granted, and some came near their budget or ran out of it.
    expect(granted).toBeGreaterThanOrEqual(calls / 2);
    expect(nearTheBudget + budgetErrors).toBeGreaterThanOrEqual(5);
  });

  it("negative control: clients without a budget send past the budgets drawn", async () => {
    let over = 0;
    for (const seed of [7, 12, 19]) {
      const { calls } = await scenario(seed, true);
      over += calls.filter((call) => call.counted > call.budget).length;
    }
    expect(over).toBeGreaterThan(0);
  });
});
