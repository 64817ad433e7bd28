/**
 * One acquisition attempt: a fresh token, `SET NX PX` (or the all-or-none script) on every node
 * at once, the vote, and on failure the cleanup of whatever the attempt may have written.
 * @module
 */
import { fullJitterDelay } from "../backoff.js";
import type { Engine } from "../engine.js";
import {
  AbortedError,
  AcquireTimeoutError,
  ConfigurationError,
  InvalidArgumentError,
  LockHeldError,
  QuorumUnavailableError,
  type RedlockError,
  ValidityExhaustedError,
} from "../errors.js";
import { Lock, type LockOperations } from "../lock.js";
import { acquireOnNode } from "../node-operations.js";
import { MAX_DELAY_MS, type ResolvedOptions } from "../options.js";
import { refusalReason } from "../quorum.js";
import type { AttemptReport } from "../report.js";
import { sleep } from "../signals.js";
import { randomToken } from "../token.js";
import { cleanUpAcquisition } from "./cleanup.js";
import { summary } from "./summary.js";

/** What is being acquired, resolved and validated once per `acquire()` call. */
export interface AcquireRequest {
  /** Sorted resource names. */
  readonly resources: readonly string[];
  /** Their keys, in the same order. */
  readonly keys: readonly string[];
  readonly ttlMs: number;
  readonly options: ResolvedOptions;
}

/** The outcome of one attempt: a lock, or the report of why not. */
export type AttemptResult = { lock: Lock; report: AttemptReport } | { lock?: undefined; report: AttemptReport };

/** Make one attempt on every node. Never throws for node failures: the report says what happened. */
export async function attemptAcquire(
  engine: Engine,
  request: AcquireRequest,
  attempt: number,
  signal: AbortSignal | undefined,
  operations: LockOperations,
): Promise<AttemptResult> {
  const { resources, keys, ttlMs, options } = request;
  // A fresh token per attempt: cleanup of a failed attempt can then never delete the keys of a
  // later, successful one.
  const token = randomToken();
  const vote = await engine.vote(options, "acquire", resources, attempt, ttlMs, {
    yes: "acquired",
    signal,
    task: (i, context) => acquireOnNode(engine.node(i), keys, token, ttlMs, context),
  });
  const { report, fan } = vote;
  if (report.ok) {
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
    });
    return { lock, report };
  }
  cleanUpAcquisition(engine, request, token, fan);
  return { report };
}

/**
 * `acquire()`: attempts until one succeeds or attempts, time or the caller's signal run out,
 * waiting between attempts as the retry policy says.
 * @throws {LockHeldError | QuorumUnavailableError | ValidityExhaustedError | AcquireTimeoutError | AbortedError | ConfigurationError}
 */
export async function acquireLock(
  engine: Engine,
  request: AcquireRequest,
  maxAttempts: number,
  signal: AbortSignal | undefined,
  operations: LockOperations,
): Promise<Lock> {
  const { resources, options: o } = request;
  const deadline = o.acquireTimeoutMs === undefined ? Number.POSITIVE_INFINITY : o.clock.now() + o.acquireTimeoutMs;
  const reports: AttemptReport[] = [];
  for (let attempt = 1; ; attempt++) {
    if (signal?.aborted) throw abortedError(resources, reports, signal.reason);
    const result = await attemptAcquire(engine, request, attempt, signal, operations);
    reports.push(result.report);
    if (result.lock) return result.lock;
    const configError = result.report.nodes.find((n) => n.error instanceof ConfigurationError)?.error;
    if (configError) {
      throw new ConfigurationError(configError.message, {
        node: (configError as ConfigurationError).node,
        cause: configError,
        attempts: reports,
      });
    }
    if (signal?.aborted) throw abortedError(resources, reports, signal.reason);
    if (attempt >= maxAttempts) throw failureError(resources, reports, o.quorum);
    const delay = retryDelay(o, attempt, result.report, reports);
    if (delay === null) throw failureError(resources, reports, o.quorum);
    if (o.clock.now() + delay >= deadline) {
      throw new AcquireTimeoutError(
        `could not acquire ${resources.join(", ")} within ${o.acquireTimeoutMs} ms (${attempt} attempt${attempt === 1 ? "" : "s"}): ${summary(result.report)}`,
        reports,
      );
    }
    try {
      await sleep(delay, signal);
    } catch (reason) {
      throw abortedError(resources, reports, reason);
    }
  }
}

/** The delay before the next attempt: the caller's policy, checked, or full-jitter backoff. */
function retryDelay(
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

function abortedError(resources: readonly string[], reports: AttemptReport[], reason: unknown): AbortedError {
  return new AbortedError(`acquiring ${resources.join(", ")} was aborted`, reports, reason);
}

/** The error that says why the last attempt failed: validity, contention or node failures. */
function failureError(resources: readonly string[], reports: AttemptReport[], quorum: number): RedlockError {
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
  return new QuorumUnavailableError(`no quorum for ${what} after ${tries}: ${summary(last)}`, reports, cause);
}
