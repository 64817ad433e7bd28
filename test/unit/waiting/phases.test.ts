/** The waiter's transitions, as a table: every phase's possible ends, and the phase each leads to. */
import { describe, expect, it } from "vitest";
import type { AttemptReport } from "../../../src/base/report.js";
import type { Lock } from "../../../src/core/lock.js";
import { type PhaseEnd, type Step, transition } from "../../../src/waiting/phases.js";

const lock = { token: "granted" } as unknown as Lock;
const report = { votes: 1 } as unknown as AttemptReport;

const firstFanOut: Step = { phase: "fan-out", after: "decide" };
const gateFailed: Step = { phase: "fan-out", after: "back-off" };
const inLine: Step = { phase: "in-line", firstPollInMs: 0 };
const backingOff: Step = { phase: "backing-off", last: report };
const lastFanOut: Step = { phase: "last-fan-out" };

describe("transition", () => {
  it.each<{ from: Step; end: PhaseEnd; to: Step }>([
    // A grant ends every phase.
    ...[firstFanOut, gateFailed, inLine, backingOff, lastFanOut].map((from) => ({
      from,
      end: { kind: "granted", lock } as const,
      to: { phase: "done", lock } as const,
    })),
    // The first fan-out: held elsewhere with a usable gate, in line; anything else, backoff.
    {
      from: firstFanOut,
      end: { kind: "refused", report, contention: true },
      to: { phase: "in-line", firstPollInMs: 0 },
    },
    {
      from: firstFanOut,
      end: { kind: "refused", report, contention: false },
      to: { phase: "backing-off", last: report },
    },
    // After the gate failed: backoff, whatever the nodes said (its delay comes first).
    {
      from: gateFailed,
      end: { kind: "refused", report, contention: true },
      to: { phase: "backing-off", last: report },
    },
    {
      from: gateFailed,
      end: { kind: "refused", report, contention: false },
      to: { phase: "backing-off", last: report },
    },
    // In line.
    { from: inLine, end: { kind: "gate-down" }, to: { phase: "fan-out", after: "back-off" } },
    { from: inLine, end: { kind: "contested", last: report }, to: { phase: "backing-off", last: report } },
    { from: inLine, end: { kind: "contested", last: undefined }, to: { phase: "fan-out", after: "back-off" } },
    { from: inLine, end: { kind: "patience-ran-out" }, to: { phase: "last-fan-out" } },
    // Backing off: back in line once the lock is held elsewhere with a usable gate.
    { from: backingOff, end: { kind: "contention" }, to: { phase: "in-line", firstPollInMs: 0 } },
  ])("$from.phase, $end.kind → $to.phase", ({ from, end, to }) => {
    expect(transition(from, end)).toEqual(to);
  });
});
