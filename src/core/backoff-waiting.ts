/**
 * Waiting by backoff alone: a fan-out to every node, and while the lock is held elsewhere (or too
 * many nodes failed) another after a full-jitter delay, or the caller's `retryDelay`. The waiting
 * strategy of the plain preset, `edge-redlock/core`; the default one waits in line instead
 * (`waiting/`) and falls back to this schedule when its gate node is down.
 * @module
 */
import { AcquireTimeoutError, ConfigurationError, InvalidArgumentError, RequestBudgetError } from "../base/errors.js";
import type { AttemptReport } from "../base/report.js";
import { sleep } from "../base/signals.js";
import { budgetSpread, fullJitterDelay, patience } from "./backoff.js";
import type { Engine } from "./engine.js";
import { endCall } from "./fanout.js";
import type { Lock } from "./lock.js";
import { abortedError, attemptOnce, failureError, rateLimitOf } from "./operations/acquire.js";
import { summary } from "./operations/summary.js";
import { type AcquireRequest, MAX_DELAY_MS, type ResolvedOptions, withinBudget } from "./options.js";
import type { WaitingStrategy } from "./waiting.js";

/** Waiting by backoff alone (see the module's documentation). */
export const backoffWaiting: WaitingStrategy = {
  forClient: (engine) => ({
    acquire: (request, maxAttempts, signal, operations) =>
      acquireWithBackoff(engine, request, maxAttempts, signal, (attempt) =>
        attemptOnce(engine, request, attempt, signal, operations),
      ),
  }),
};

/**
 * Attempts (`attemptOnce(n)`, each a fan-out to every node) with the retry policy's delays in
 * between, until one is granted, or the attempts, the acquire deadline, the request budget or the
 * caller's signal run out. The read-write lock waits the same way with attempts of its own.
 */
export async function acquireWithBackoff(
  engine: Engine,
  request: AcquireRequest,
  maxAttempts: number,
  signal: AbortSignal | undefined,
  attemptOnce: (attempt: number) => Promise<{ readonly lock?: Lock | undefined; readonly report: AttemptReport }>,
): Promise<Lock> {
  const o = request.options;
  const reports: AttemptReport[] = [];
  const sent = () => request.meter?.sent ?? requestsOf(reports);
  const startedAt = o.clock.now();
  const deadline = o.acquireTimeoutMs === undefined ? Number.POSITIVE_INFINITY : startedAt + o.acquireTimeoutMs;
  const nodeCount = engine.nodes.length;
  const cost = attemptCost(request, nodeCount);
  try {
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw abortedError(request.resources, reports, signal.reason);
      checkBudget(request, reports, sent(), cost, nodeCount);
      const result = await attemptOnce(attempt);
      reports.push(result.report);
      if (result.lock) return result.lock;
      stopAfter(request, result.report, reports, signal, attempt >= maxAttempts);
      const now = o.clock.now();
      const spread = budgetedDelay(o, now, sent(), cost, nodeCount, maxAttempts, attempt, startedAt, deadline);
      const delay = Math.max(retryDelay(o, attempt, result.report, reports, request.resources), spread);
      if (now + delay >= deadline) throw acquireTimeout(request, reports);
      try {
        await sleep(delay, signal);
      } catch (reason) {
        throw abortedError(request.resources, reports, reason);
      }
    }
  } finally {
    endCall(request.meter);
  }
}

/**
 * The least delay before the next fan-out of a wait by backoff, at `now`: when the request budget
 * allows fewer fan-outs (of `cost` requests each, after the `sent` ones, the release's `nodeCount`
 * kept) than the `maxAttempts` less the `attempt` made, they are spread to the end of the retry
 * schedule (the sum of its ceilings from `startedAt`, or the `deadline`), at most
 * `retryMaxDelayMs` apart (see `backoff.budgetSpread`; a waiting writer's mark outlasts that).
 * Spent at the schedule's pace, they all met the same holders in the first second, and the call
 * gave up on its budget while the lock was about to be free. 0 when the budget allows the schedule.
 */
export function budgetedDelay(
  o: ResolvedOptions,
  now: number,
  sent: number,
  cost: number,
  nodeCount: number,
  maxAttempts: number,
  attempt: number,
  startedAt: number,
  deadline: number,
): number {
  const scheduleEnd = Math.min(deadline, startedAt + patience(maxAttempts, o.retryBaseDelayMs, o.retryMaxDelayMs));
  const affordable = Math.floor((o.requestBudget - sent - nodeCount) / cost);
  return budgetSpread(
    affordable,
    maxAttempts - attempt,
    now - startedAt,
    scheduleEnd - now,
    o.retryBaseDelayMs,
    o.retryMaxDelayMs,
    Math.random(),
  );
}

/**
 * Throws when a refused attempt says stop: a node rejected its token, the caller's signal
 * aborted, or (`last`) no attempts are left.
 */
export function stopAfter(
  request: AcquireRequest,
  report: AttemptReport,
  reports: AttemptReport[],
  signal: AbortSignal | undefined,
  last: boolean,
): void {
  const rejected = report.nodes.find((n) => n.error instanceof ConfigurationError)?.error as
    | ConfigurationError
    | undefined;
  if (rejected) throw withAttempts(rejected, reports);
  if (signal?.aborted) throw abortedError(request.resources, reports, signal.reason);
  if (last) throw failureError(request.resources, reports, request.options.quorum);
}

/** Requests one attempt may send: one per node, two phases of them when fenced. */
export function attemptCost(request: AcquireRequest, nodeCount: number): number {
  return request.options.fencing ? 2 * nodeCount : nodeCount;
}

/** Requests the attempts of `reports` sent. */
export function requestsOf(reports: readonly AttemptReport[]): number {
  let sent = 0;
  for (const report of reports) sent += report.requests;
  return sent;
}

/**
 * Throws a `RequestBudgetError` when sending `next` more requests, after the `sent` ones, would
 * leave fewer than the release of the lock needs (one per node) within `requestBudget`.
 */
export function checkBudget(
  request: AcquireRequest,
  reports: AttemptReport[],
  sent: number,
  next: number,
  nodeCount: number,
): void {
  if (withinBudget(request.options, sent, next, nodeCount)) return;
  const budget = request.options.requestBudget;
  const ended = reports.length > 0 ? failureError(request.resources, reports, request.options.quorum) : undefined;
  throw new RequestBudgetError(
    `acquiring ${request.resources.join(", ")} gave up after ${sent} requests${ended ? ` (${ended.code})` : ""}: going on would pass the requestBudget of ${budget} (${nodeCount} kept for the release)`,
    reports,
    budget,
    sent,
    ended,
  );
}

/** A node's `ConfigurationError` (it rejected its REST token), with the attempts made. */
export function withAttempts(error: ConfigurationError, reports: AttemptReport[]): ConfigurationError {
  return new ConfigurationError(error.message, {
    node: error.node,
    cause: error,
    attempts: reports,
    ...(error.status === undefined ? {} : { status: error.status }),
  });
}

/** The acquire deadline passed: `AcquireTimeoutError`, with the attempts made. */
export function acquireTimeout(request: AcquireRequest, reports: AttemptReport[]): AcquireTimeoutError {
  const last = reports.at(-1);
  const n = reports.length;
  return new AcquireTimeoutError(
    `could not acquire ${request.resources.join(", ")} within ${request.options.acquireTimeoutMs} ms (${n} attempt${n === 1 ? "" : "s"})${last ? `: ${summary(last)}` : ""}`,
    reports,
  );
}

/**
 * The delay before the next fan-out after attempt number `attempt` failed: the caller's
 * `retryDelay`, checked, or full-jitter backoff.
 * @throws the failure of the attempts when `retryDelay` returns `null`.
 */
export function retryDelay(
  o: ResolvedOptions,
  attempt: number,
  report: AttemptReport,
  reports: AttemptReport[],
  resources: readonly string[],
): number {
  const delay = policyDelay(o, attempt, report, reports);
  if (delay === null) throw failureError(resources, reports, o.quorum);
  // Nodes that rate-limited us said when to come back: never sooner.
  const after = rateLimitOf(report)?.retryAfterMs;
  return after === undefined ? delay : Math.max(delay, Math.min(after, MAX_DELAY_MS));
}

/** The retry policy's delay after attempt number `attempt` failed, or `null` when it says stop. */
export function policyDelay(
  o: ResolvedOptions,
  attempt: number,
  report: AttemptReport,
  reports: AttemptReport[],
): number | null {
  if (!o.retryDelay) return fullJitterDelay(attempt, o.retryBaseDelayMs, o.retryMaxDelayMs, Math.random());
  let delay: unknown;
  try {
    delay = o.retryDelay({ attempt, report });
  } catch (cause) {
    throw new ConfigurationError("the retryDelay option threw", { cause, attempts: reports });
  }
  if (delay === null) return null;
  if (typeof delay !== "number" || !Number.isFinite(delay) || delay < 0 || delay > MAX_DELAY_MS) {
    throw new InvalidArgumentError(
      `retryDelay must return null or a number of milliseconds from 0 to ${MAX_DELAY_MS}, got ${String(delay)}`,
    );
  }
  return delay;
}
