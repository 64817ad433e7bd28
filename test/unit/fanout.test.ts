/**
 * The fan-out's AbortController is borrowed and given back (src/abort-controllers.ts): it must
 * serve another fan-out only when nothing can still abort it or listen to it.
 */
import { describe, expect, it } from "vitest";
import type { Clock } from "../../src/base/clock.js";
import type { NodeOutcomeKind } from "../../src/base/report.js";
import { signalsOutliveRequests } from "../../src/core/abort-controllers.js";
import { type FanOut, fanOut, type TaskContext } from "../../src/core/fanout.js";

const clock: Clock = { now: () => performance.now() };

/** A fan-out over `n` nodes whose tasks are given by `task`; records the signal each task saw. */
function start(
  n: number,
  task: (index: number, context: TaskContext) => Promise<NodeOutcomeKind>,
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): { fan: FanOut; signals: AbortSignal[] } {
  const signals: AbortSignal[] = [];
  const fan = fanOut({
    nodeIds: Array.from({ length: n }, (_, i) => `n${i}`),
    yes: "acquired",
    quorum: Math.floor(n / 2) + 1,
    timeoutMs: options.timeoutMs ?? 1000,
    signal: options.signal,
    clock,
    task: (index, context) => {
      signals.push(context.signal);
      return task(index, context);
    },
  });
  return { fan, signals };
}

const answer = async (): Promise<NodeOutcomeKind> => "acquired";
/** A task that never answers and ignores its signal. */
const silent = (): Promise<NodeOutcomeKind> => new Promise(() => {});

describe("fan-out signals", () => {
  it("one signal serves all nodes of a fan-out, and the next fan-out once the first ended without aborting", async () => {
    const first = start(5, answer);
    await first.fan.outcomes;
    const second = start(5, answer);
    await second.fan.outcomes;
    expect(new Set(first.signals).size).toBe(1);
    expect(second.signals[0]).toBe(first.signals[0]);
    expect(second.signals[0]?.aborted).toBe(false);
  });

  it("never lends a signal to two fan-outs at once", async () => {
    const first = start(3, answer);
    const second = start(3, answer);
    expect(second.signals[0]).not.toBe(first.signals[0]);
    await Promise.all([first.fan.outcomes, second.fan.outcomes]);
  });

  it("never lends a signal that aborted at a deadline: the next fan-out starts with a live one", async () => {
    const timedOut = start(3, silent, { timeoutMs: 20 });
    const outcomes = await timedOut.fan.outcomes;
    expect(outcomes.map((o) => o.outcome)).toEqual(["timeout", "timeout", "timeout"]);
    expect(timedOut.signals[0]?.aborted).toBe(true);
    const next = start(3, answer);
    await next.fan.outcomes;
    expect(next.signals[0]).not.toBe(timedOut.signals[0]);
    expect(next.signals[0]?.aborted).toBe(false);
  });

  it("a caller's abort after its fan-out ended does not reach the fan-out that reuses the controller", async () => {
    const caller = new AbortController();
    const first = start(3, answer, { signal: caller.signal });
    await first.fan.outcomes;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const second = start(3, async () => {
      await gate;
      return "acquired";
    });
    expect(second.signals[0]).toBe(first.signals[0]);
    caller.abort(new Error("late"));
    release();
    const outcomes = await second.fan.outcomes;
    expect(second.signals[0]?.aborted).toBe(false);
    expect(outcomes.map((o) => o.outcome)).toEqual(["acquired", "acquired", "acquired"]);
  });

  it("a fan-out the caller aborted keeps its aborted signal to itself", async () => {
    const caller = new AbortController();
    const aborted = start(3, silent, { signal: caller.signal });
    caller.abort(new Error("stop"));
    const outcomes = await aborted.fan.outcomes;
    expect(outcomes.map((o) => o.outcome)).toEqual(["aborted", "aborted", "aborted"]);
    const next = start(3, answer);
    await next.fan.outcomes;
    expect(next.signals[0]).not.toBe(aborted.signals[0]);
    expect(next.signals[0]?.aborted).toBe(false);
  });
});

describe("where signals are recycled", () => {
  it("Node, Deno and Bun; not Cloudflare Workers, Vercel's Edge runtime or an unknown runtime", () => {
    expect(signalsOutliveRequests({})).toBe(true); // Node 20: no navigator
    expect(signalsOutliveRequests({ navigator: { userAgent: "Node.js/22" } })).toBe(true);
    expect(signalsOutliveRequests({ navigator: { userAgent: "Deno/2.9.6" } })).toBe(true);
    expect(signalsOutliveRequests({ navigator: { userAgent: "Bun/1.4.5" } })).toBe(true);
    expect(signalsOutliveRequests({ navigator: { userAgent: "Cloudflare-Workers" } })).toBe(false);
    expect(signalsOutliveRequests({ EdgeRuntime: "edge-runtime" })).toBe(false);
    expect(signalsOutliveRequests({ navigator: {} })).toBe(false);
    expect(signalsOutliveRequests({ navigator: { userAgent: "SomethingElse/1" } })).toBe(false);
  });
});
