/**
 * What `requestBudget` counts of one `acquire()` call (see `RequestMeter` in src/core/fanout.ts):
 * every request the call's isolate sends from the call until it returns, whatever for (attempts,
 * polls, the cluster check, script fallbacks, leaving the gate's line, the cleanup of a failed
 * attempt), and its lock's release (the release's report counts it). What background work sends
 * after the call returned is not the call's: `settled()` covers it. Tests count at the nodes,
 * where the requests leave the isolate, and need no list of what counts.
 */
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
