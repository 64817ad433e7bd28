/**
 * The waiter's phases and every transition between them, as one pure function.
 *
 * - `fan-out`: one plain attempt on every node. Then, when the lock is held elsewhere and the gate
 *   is usable, `in-line` (`after: "decide"`); otherwise, or always after the gate failed
 *   (`after: "back-off"`), `backing-off`.
 * - `in-line`: polling the gate until it is our turn, then taking the lock (first in line: aiming a
 *   take at the predicted release, or offering to take it over from a release in the isolate).
 *   A gate that does not answer leads to `fan-out` then `backing-off`; keys held by another resource
 *   set (`contested`) to `backing-off` for the rest of the call.
 * - `backing-off`: fan-outs with the retry policy's delays in between, until contention with a
 *   usable gate sends the waiter back `in-line`.
 * - `last-fan-out`: the patience ran out in line before any fan-out: one, so that the call gives
 *   up on what the nodes say, and its error lists the attempt.
 * - `done`: granted.
 *
 * Giving up (attempts, deadline, patience, the caller's signal) is an error thrown from any phase.
 * @module
 */

import type { AttemptReport } from "../base/report.js";
import type { Lock } from "../core/lock.js";

/** The waiter's phases (see the module's description). */
export type Phase = "fan-out" | "in-line" | "backing-off" | "last-fan-out" | "done";

/** A phase with what it starts from. */
export type Step =
  | { readonly phase: "fan-out"; readonly after: "decide" | "back-off" }
  | { readonly phase: "in-line"; readonly firstPollInMs: number }
  | { readonly phase: "backing-off"; readonly last: AttemptReport }
  | { readonly phase: "last-fan-out" }
  | { readonly phase: "done"; readonly lock: Lock };

/** How a phase ended. */
export type PhaseEnd =
  /** The lock is ours. */
  | { readonly kind: "granted"; readonly lock: Lock }
  /** A fan-out was refused; `contention`: held elsewhere, and waiting in line is possible. */
  | { readonly kind: "refused"; readonly report: AttemptReport; readonly contention: boolean }
  /** The gate did not answer a poll. */
  | { readonly kind: "gate-down" }
  /** The gate shows our keys partly held by another resource set; `last`: our last attempt's report. */
  | { readonly kind: "contested"; readonly last: AttemptReport | undefined }
  /** Backing off, the lock turned out held elsewhere with the gate usable again. */
  | { readonly kind: "contention" }
  /** Waiting in line ran out of patience before any fan-out. */
  | { readonly kind: "patience-ran-out" };

/** The step after `step` ended with `end`. */
export function transition(step: Step, end: PhaseEnd): Step {
  switch (end.kind) {
    case "granted":
      return { phase: "done", lock: end.lock };
    case "refused":
      return step.phase === "fan-out" && step.after === "decide" && end.contention
        ? { phase: "in-line", firstPollInMs: 0 }
        : { phase: "backing-off", last: end.report };
    case "gate-down":
      return { phase: "fan-out", after: "back-off" };
    case "contested":
      return end.last === undefined
        ? { phase: "fan-out", after: "back-off" }
        : { phase: "backing-off", last: end.last };
    case "contention":
      return { phase: "in-line", firstPollInMs: 0 };
    case "patience-ran-out":
      return { phase: "last-fan-out" };
  }
}
