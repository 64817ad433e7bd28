/**
 * Which requests of one `acquire()` call and its lock's release `requestBudget` counts (see
 * `RequestMeter` in src/core/fanout.ts), told apart where they leave the caller's isolate: the
 * call's attempts (`SET NX`, the all-or-none script), its polls of the gate and the cluster check,
 * and the release. Not counted: what the call starts and does not wait for, leaving the gate's
 * line and the cleanup of a failed attempt (releasing its keys, or keeping a placeholder on the
 * gate), which `settled()` covers.
 */
import { acquireAllScript } from "../../../src/core/scripts/acquire-all.js";
import { clusterScript } from "../../../src/core/scripts/cluster.js";
import type { RedisArgument } from "../../../src/index.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";

/** Whether a script command (`EVALSHA sha1` or `EVAL source`) runs `script`. */
function runs(args: readonly RedisArgument[], script: { sha1: string; source: string }): boolean {
  return (args[0] === "EVALSHA" && args[1] === script.sha1) || (args[0] === "EVAL" && args[1] === script.source);
}

/** The mode of a gate request (`take`, `aim`, `wait`, `leave`), or undefined for any other command. */
export function gateMode(args: readonly RedisArgument[]): string | undefined {
  return runs(args, gateScript) ? String(args[4 + Number(args[2])]) : undefined;
}

/** The token of an aimed take's gate request (one per attempt), or undefined for any other command. */
export function aimToken(args: readonly RedisArgument[]): string | undefined {
  return gateMode(args) === "aim" ? String(args[5 + Number(args[2])]) : undefined;
}

/** Whether `args`, sent while the call is `acquiring` or its lock `releasing`, counts against the budget. */
export function countedByBudget(args: readonly RedisArgument[], phase: "acquiring" | "releasing"): boolean {
  const mode = gateMode(args);
  if (mode !== undefined) return mode !== "leave";
  if (phase === "releasing") return true;
  return args[0] === "SET" || runs(args, clusterScript) || runs(args, acquireAllScript);
}

/** What one run of a budget sweep reports: what the budget counts, a grant, and how often a node was asked again. */
export interface BudgetRun {
  readonly counted: number;
  readonly granted: boolean;
  readonly askedAgain: number;
}

/**
 * Runs `run(budget, x)` for every budget and every `x` (a lag, a hold: what varies the timing), and
 * returns the runs that counted more than their budget (as text), how many got the lock, and in how
 * many a node was asked again (more than once with one token): the last two say the sweep was
 * not vacuous.
 */
export async function sweepBudgets(
  budgets: readonly number[],
  xs: readonly number[],
  run: (budget: number, x: number) => Promise<BudgetRun>,
): Promise<{ over: string[]; grants: number; askedAgain: number }> {
  const over: string[] = [];
  let grants = 0;
  let askedAgain = 0;
  for (const budget of budgets) {
    for (const x of xs) {
      const result = await run(budget, x);
      if (result.counted > budget) over.push(`budget ${budget}, ${x} ms: ${result.counted} requests`);
      if (result.granted) grants++;
      if (result.askedAgain > 1) askedAgain++;
    }
  }
  return { over, grants, askedAgain };
}

/** `from`, `from + step`, … up to `to`. */
export function range(from: number, to: number, step = 1): number[] {
  return Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => from + i * step);
}
