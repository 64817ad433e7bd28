import {
  AbortedError,
  LockHeldError,
  NodeError,
  QuorumUnavailableError,
  RateLimitedError,
  type RedlockError,
  ValidityExhaustedError,
} from "../../base/errors.js";
import type { AttemptReport, NodeOutcome, NodeOutcomeKind } from "../../base/report.js";
import { sleep } from "../../base/signals.js";
import type { RedisReply } from "../../transport/rest.js";
import type { Engine, Vote } from "../engine.js";
import type { FanOut, TaskContext } from "../fanout.js";
import { Lock, type LockOperations } from "../lock.js";
import { acquireOnNode, readSet, setOnNode } from "../node-operations.js";
import type { AcquireRequest, Fencing, ResolvedOptions } from "../options.js";
import { isFailure, reasonPending, refusalReason } from "../quorum.js";
import { randomToken } from "../token.js";
import { cleanUpAcquisition } from "./cleanup.js";
import { summary } from "./summary.js";

/** The outcome of one attempt: a lock, or the report of why not. */
export type AttemptResult =
  | {
      lock: Lock;
      report: AttemptReport;
      /** The attempt's fan-out: answers still in flight when the vote was decided arrive through it. */
      fan?: FanOut;
    }
  | {
      lock?: undefined;
      report: AttemptReport;
      token: string;
      /** The attempt's fan-out: answers still in flight when the vote was decided arrive through it. */
      fan?: FanOut;
    };

/**
 * How the gate node takes part in an attempt made while waiting: a task of its own (a take-mode
 * poll instead of `SET NX`, or nothing at all when an earlier poll already took it), the token
 * that poll used, and the clock reading validity counts from.
 */
export interface GateRole {
  readonly index: number;
  readonly token: string;
  readonly task: (context: TaskContext) => Promise<NodeOutcomeKind>;
  /** Set when the gate was taken before this attempt: validity counts from that poll's send. */
  readonly startedAt?: number | undefined;
  /** Set when the gate was taken before this attempt: when that poll's answer arrived. */
  readonly takenAt?: number | undefined;
  /**
   * When the gate said yes but the others hold another token, keep our key on the gate for this
   * long instead of releasing it (see `cleanUpAcquisition`). Asked once the answers are in.
   */
  readonly placeholderMs: () => number;
  /**
   * Whether the gate is ours (it answered yes), or a promise of that when the gate's answer is
   * still on its way. While it is, a node that answers "held" is asked
   * again every `retryHeldEveryMs`, for up to `retryHeldMs`: the previous holder's release reaches
   * the nodes one by one, and the gate saw it first. Each new `SET NX` follows a definite "held"
   * (nothing was written), so this is not a transport retry; validity still counts from the
   * attempt's first send.
   */
  readonly gateTaken: () => boolean | Promise<boolean>;
  /**
   * Whether the gate's part is still asking the gate (it landed before the release, which is due,
   * and asks again): meanwhile a node that answers "held" is asked again as while the gate is ours.
   */
  readonly gateTrying?: (() => boolean) | undefined;
  readonly retryHeldMs: number;
  readonly retryHeldEveryMs: number;
  /**
   * Asked right before a node that said "held" is asked again, and counts that request when it
   * says yes: whether the call's request budget allows it, with the lock's release and what the
   * waiting keeps for its turns after this attempt (see `in-line.retryHeldFor`).
   */
  readonly mayAskAgain: () => boolean;
  /**
   * How the other nodes take part, when not by `SET NX` (asked again as `gateTaken` says): a
   * lock handed over by a release reads what the release's requests did (see `handoff.ts`).
   */
  readonly others?: ((index: number, context: TaskContext) => Promise<NodeOutcomeKind>) | undefined;
  /**
   * How long after the attempt starts each node's request is sent, in ms, by node index (all at
   * once when absent): a take aimed to land on every node at the same moment. Validity still counts
   * from the attempt's start, before any of them.
   */
  readonly sendDelaysMs?: readonly number[] | undefined;
}

/**
 * A gate node a poll already set the lock keys on, for a fenced attempt that follows it: the
 * attempt uses the poll's token (the gate's phase 1 finds the keys its own), and its validity
 * counts from the poll's send, when the keys may first have been set.
 */
export interface TakenGate {
  readonly token: string;
  readonly startedAt: number;
}

/**
 * One attempt (a fan-out to every node), numbered `attempt`; `polls` made before it, for its
 * report; `taken`, for a fenced attempt only, the gate a poll took for it.
 */
export type Attempt = (
  engine: Engine,
  request: AcquireRequest,
  attempt: number,
  signal: AbortSignal | undefined,
  operations: LockOperations,
  polls?: number,
  taken?: TakenGate,
) => Promise<AttemptResult>;

/**
 * What the `fencing` value of `edge-redlock/fencing` is inside: its own attempt (two phases, see
 * `fencing/acquire.ts`) and the check of an extension's TTL against the quarantine. The core calls
 * it through this interface and never imports the fencing module.
 */
export interface FencedAttempts extends Fencing {
  readonly attempt: Attempt;
  /** @throws {InvalidArgumentError} when an extension to `ttlMs` would outlast the quarantine. */
  checkExtension(ttlMs: number, o: ResolvedOptions): void;
}

/** The options' fencing, if they ask for it. */
export function fencingOf(o: ResolvedOptions): FencedAttempts | undefined {
  return o.fencing === false ? undefined : (o.fencing as FencedAttempts);
}

/** One plain attempt, or a fenced one when the options ask for fencing. Never throws for node failures. */
export const attemptOnce: Attempt = (engine, request, attempt, signal, operations, polls, taken) => {
  const fencing = fencingOf(request.options);
  if (fencing) return fencing.attempt(engine, request, attempt, signal, operations, polls, taken);
  return attemptAcquire(engine, request, attempt, signal, operations, undefined, polls);
};

/** Make one attempt on every node. Never throws for node failures: the report says what happened. */
export function attemptAcquire(
  engine: Engine,
  request: AcquireRequest,
  attempt: number,
  signal: AbortSignal | undefined,
  operations: LockOperations,
  gate?: GateRole,
  polls?: number,
): Promise<AttemptResult> {
  const { resources, keys, ttlMs, options } = request;
  // A fresh token per attempt: cleanup of a failed attempt can then never delete the keys of a
  // later, successful one.
  const token = gate?.token ?? randomToken();
  // The common attempt, one key and no gate: each node's reply to `SET NX` is read in the
  // fan-out's own reaction (see `FanOutOptions.read`).
  const key = gate === undefined && keys.length === 1 ? (keys[0] as string) : undefined;
  const voting = engine.vote(options, "acquire", resources, attempt, ttlMs, {
    yes: "acquired",
    signal,
    startedAt: gate?.startedAt,
    polls,
    meter: request.meter,
    timeoutMs: gate
      ? options.requestTimeoutMs + gate.retryHeldMs + Math.max(0, ...(gate.sendDelaysMs ?? []))
      : undefined,
    read: key === undefined ? undefined : (reply, i) => readSet(reply as RedisReply, engine.node(i)),
    task: (i, context) => {
      if (key !== undefined) return setOnNode(engine.node(i), key, token, ttlMs, context);
      if (gate === undefined) return acquireOnNode(engine.node(i), keys, token, ttlMs, context);
      const delay = gate.sendDelaysMs?.[i] ?? 0;
      if (delay > 0)
        return sleep(delay, context.signal).then(() => behindGate(engine, request, i, token, gate, context));
      return behindGate(engine, request, i, token, gate, context);
    },
  });
  // The attempt ends in the reaction to its vote, not in an async function: one promise and
  // frame fewer per attempt.
  return voting.then((vote) => {
    // An attempt behind the gate asks "held" nodes again while it may: its waiter reads its answers.
    if (gate || !reasonAwaited(vote.report, options.quorum))
      return attempted(engine, request, operations, token, gate, vote, vote.report);
    return settledReport(vote, options.quorum).then((report) =>
      attempted(engine, request, operations, token, gate, vote, report),
    );
  });
}

/** The attempt's result from its decided vote and `report`: a lock, or the cleanup started and the report. */
function attempted(
  engine: Engine,
  request: AcquireRequest,
  operations: LockOperations,
  token: string,
  gate: GateRole | undefined,
  vote: Vote,
  report: AttemptReport,
): AttemptResult {
  const { resources, keys, ttlMs, options } = request;
  const { fan } = vote;
  if (report.ok) {
    const gateLeadMs = gate?.takenAt === undefined ? 0 : Math.max(0, Math.round(vote.decidedAt - gate.takenAt));
    const lock = new Lock({
      resources,
      keys,
      token,
      ttlMs,
      startedAt: vote.startedAt,
      deadline: vote.deadline,
      options,
      report,
      operations,
      acquireFan: fan,
      gateLeadMs,
    });
    return { lock, report, fan };
  }
  // Behind the gate, the cleanup keeps our key there as a placeholder when every node's answer
  // says the others hold another token (see `cleanUpAcquisition`).
  cleanUpAcquisition(
    engine,
    request,
    token,
    fan,
    undefined,
    gate === undefined ? undefined : { index: gate.index, holdMs: gate.placeholderMs() },
  );
  return { report, token, fan };
}

/**
 * The answers that say why an attempt was refused: its report's, or, when that reason depends on
 * the nodes still answering (see `quorum.reasonPending`), its fan-out's once all are in.
 */
export async function finalOutcomes(result: AttemptResult, quorum: number): Promise<readonly NodeOutcome[]> {
  const nodes = result.report.nodes;
  return result.fan !== undefined && reasonAwaited(result.report, quorum) ? await result.fan.outcomes : nodes;
}

/** Node `index`'s part in an attempt behind the gate. */
function behindGate(
  engine: Engine,
  request: AcquireRequest,
  index: number,
  token: string,
  gate: GateRole,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  if (index === gate.index) return gate.task(context);
  if (gate.others) return gate.others(index, context);
  return acquireBehindGate(engine, request, index, token, gate, context);
}

/** `SET NX` on a node, asked again while it says "held" and the gate is ours (see {@link GateRole}). */
async function acquireBehindGate(
  engine: Engine,
  request: AcquireRequest,
  index: number,
  token: string,
  gate: GateRole,
  context: TaskContext,
): Promise<NodeOutcomeKind> {
  const { keys, ttlMs, options } = request;
  const startedAt = options.clock.now();
  let until: number | undefined;
  for (;;) {
    const outcome = await acquireOnNode(engine.node(index), keys, token, ttlMs, context);
    if (outcome !== "held") return outcome;
    // The window counts from the node's first "held": a far node's answer alone takes its round
    // trip, and a window counted from the send could close before it came, failing an attempt
    // whose gate is ours. A request asked again is answered within the attempt's deadline, as the
    // first was.
    const now = options.clock.now();
    until ??= Math.min(now, 2 * startedAt + options.requestTimeoutMs - now) + gate.retryHeldMs;
    if (now + gate.retryHeldEveryMs > until) return outcome;
    if (!gate.gateTrying?.() && !(await gate.gateTaken())) return outcome;
    await sleep(gate.retryHeldEveryMs, context.signal);
    // Checked right before the send: the other nodes asked again meanwhile have each sent since
    // any earlier check (a send counts at once, so this check and its send are one step).
    if (!gate.mayAskAgain()) return outcome;
  }
}

/**
 * The report of a vote refused by a quorum it could not reach: when the refusal's class depends on
 * the nodes still answering (held on them it would be contention, failed it would be an outage),
 * with their answers, by the request deadline (see docs/how-it-works.md).
 */
export async function settledReport(vote: Vote, quorum: number): Promise<AttemptReport> {
  const report = vote.report;
  if (!reasonAwaited(report, quorum)) return report;
  return { ...report, nodes: await vote.fan.outcomes };
}

/** Whether {@link settledReport} waits for the nodes still answering (never for a granted vote). */
function reasonAwaited(report: AttemptReport, quorum: number): boolean {
  return !report.ok && report.votes < quorum && reasonPending(outcomesOf(report), quorum);
}

function outcomesOf(report: AttemptReport): NodeOutcomeKind[] {
  return report.nodes.map((n) => n.outcome);
}

export function abortedError(resources: readonly string[], reports: AttemptReport[], reason: unknown): AbortedError {
  return new AbortedError(`acquiring ${resources.join(", ")} was aborted`, reports, reason);
}

/** The error that says why the last attempt failed: validity, contention or node failures. */
export function failureError(resources: readonly string[], reports: AttemptReport[], quorum: number): RedlockError {
  const last = reports.at(-1) as AttemptReport;
  const what = resources.join(", ");
  const tries = `${reports.length} attempt${reports.length === 1 ? "" : "s"}`;
  if (last.votes >= quorum) {
    return new ValidityExhaustedError(
      `acquired ${what} on a quorum but only ${Math.round(last.validityMs ?? 0)} ms of validity was left (${tries})`,
      reports,
    );
  }
  if (
    refusalReason(
      last.nodes.map((n) => n.outcome),
      quorum,
    ) === "held"
  ) {
    const heldOn = last.nodes.filter((n) => n.outcome === "held").map((n) => n.node);
    return new LockHeldError(
      `${what} is held elsewhere on ${heldOn.length} nodes (${heldOn.join(", ")}) after ${tries}`,
      reports,
    );
  }
  const cause = last.nodes.find((n) => n.error)?.error;
  const limited = rateLimitOf(last);
  if (limited !== undefined) {
    return new RateLimitedError(
      `the nodes rate-limited ${what} after ${tries}: ${summary(last)}`,
      reports,
      limited.retryAfterMs,
      cause,
    );
  }
  return new QuorumUnavailableError(`no quorum for ${what} after ${tries}: ${summary(last)}`, reports, cause);
}

/**
 * When every node that failed in `report` refused for its rate or quota: the longest
 * `Retry-After` they gave (undefined when none did). Undefined when any failed otherwise.
 */
export function rateLimitOf(report: AttemptReport): { retryAfterMs: number | undefined } | undefined {
  let failed = 0;
  let retryAfterMs: number | undefined;
  for (const n of report.nodes) {
    if (!isFailure(n.outcome)) continue;
    failed++;
    if (!(n.error instanceof NodeError) || !n.error.rateLimited) return undefined;
    const after = n.error.retryAfterMs;
    if (after !== undefined) retryAfterMs = Math.max(retryAfterMs ?? 0, after);
  }
  return failed > 0 ? { retryAfterMs } : undefined;
}
