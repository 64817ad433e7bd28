/**
 * Runs one operation on every node at once and settles as soon as the vote is decided. Knows
 * nothing of HTTP: each node's work is a task that resolves with its outcome or throws.
 *
 * One fan-out owns one deadline (a single timer and a single AbortController for all its nodes),
 * not one per node: that is most of the client's CPU cost per operation. The controller is
 * borrowed from a pool and returned when the fan-out ends without aborting it (see
 * `abort-controllers.ts`).
 * @module
 */

import type { Clock } from "../base/clock.js";
import type { NodeOutcome, NodeOutcomeKind } from "../base/report.js";
import { borrowController, returnController } from "./abort-controllers.js";
import { decide } from "./quorum.js";

/** What one node's task is given. */
export interface TaskContext {
  /** Aborts at the fan-out's deadline or when the caller's signal aborts. */
  readonly signal: AbortSignal;
  /** Call once per HTTP request sent, so attempts can report their request count. */
  countRequest(): void;
}

/**
 * The requests one `acquire()` call has sent and waited for, through every fan-out it made (its
 * attempts, its polls, the cluster check): what its request budget counts. The cleanup of its
 * failed attempts and leaving the gate's line run in the background, not waited for, and are not
 * counted (`settled()` covers them).
 */
export interface RequestMeter {
  sent: number;
}

/** Options of {@link fanOut}. */
export interface FanOutOptions {
  readonly nodeIds: readonly string[];
  /** The work for node `index`. Resolves with the node's outcome, or throws for a node error. */
  readonly task: (index: number, context: TaskContext) => Promise<NodeOutcomeKind>;
  /** The outcome that counts as a yes vote. */
  readonly yes: NodeOutcomeKind;
  readonly quorum: number;
  /** Deadline of every node's task, in milliseconds from the start of the fan-out. */
  readonly timeoutMs: number;
  /** The caller's signal: aborting it aborts every node's task. */
  readonly signal?: AbortSignal | undefined;
  readonly clock: Clock;
  /** Counts each request sent, besides the fan-out's own count. */
  readonly meter?: RequestMeter | undefined;
  /** Called once per node when its outcome is known, also after the vote was decided. */
  readonly onNodeSettled?: ((outcome: NodeOutcome, index: number) => void) | undefined;
}

/** The decided vote. */
export interface Decided {
  readonly granted: boolean;
  /** Clock reading when the vote was decided (or every node answered). */
  readonly decidedAt: number;
  /** Outcomes at that moment; nodes still in flight are `pending`. */
  readonly outcomes: NodeOutcome[];
  readonly requests: number;
}

/** A running fan-out. */
export interface FanOut {
  /** Clock reading taken immediately before the first task started. */
  readonly startedAt: number;
  /** Resolves as soon as a quorum said yes or a quorum has become impossible. Never rejects. */
  readonly decided: Promise<Decided>;
  /** Resolves with every node's final outcome, in node order, once all are known. Never rejects. */
  readonly outcomes: Promise<NodeOutcome[]>;
  /**
   * Per node: resolves when the node's task itself has finished, which can be later than its
   * outcome if the task ignored the abort. Use it to clean up after a request that may still land.
   */
  readonly finished: readonly Promise<void>[];
  /** Whether node `index`'s task has finished (its request can no longer land later). */
  isFinished(index: number): boolean;
  /** Node `index`'s final outcome if it is known yet, else `undefined`. */
  knownOutcome(index: number): NodeOutcome | undefined;
  /** Resolves with node `index`'s final outcome, as soon as it is known. Never rejects. */
  outcomeOf(index: number): Promise<NodeOutcome>;
}

/** The reason a fan-out's signal aborts at its deadline; its outcome kind is `timeout`. */
export class DeadlineExceeded extends Error {
  constructor(timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
    this.name = "TimeoutError";
  }
}

/** Start the operation on every node. */
export function fanOut(options: FanOutOptions): FanOut {
  const { nodeIds, quorum, clock, timeoutMs, meter } = options;
  const count = nodeIds.length;
  const final: (NodeOutcome | undefined)[] = new Array(count);
  const requestCounts: number[] = new Array(count).fill(0);
  /** Resolvers of `outcomeOf(i)` calls made before node i settled (rare: created on demand). */
  const outcomeWaiters: (((outcome: NodeOutcome) => void)[] | undefined)[] = new Array(count);
  let yes = 0;
  let no = 0;
  let isDecided = false;
  let resolveDecided!: (decided: Decided) => void;
  let resolveOutcomes!: (outcomes: NodeOutcome[]) => void;
  const decided = new Promise<Decided>((resolve) => {
    resolveDecided = resolve;
  });
  const outcomes = new Promise<NodeOutcome[]>((resolve) => {
    resolveOutcomes = resolve;
  });

  const pooled = borrowController();
  const { controller } = pooled;
  const callerSignal = options.signal;
  // The outcome is whichever comes first: the task's answer or the abort. A task that ignores
  // its signal must not hold up the vote; `finished` still tracks it.
  const abort = (reason: unknown) => {
    // Once every node settled the controller may serve another fan-out: never abort it from here.
    if (yes + no === count || controller.signal.aborted) return;
    controller.abort(reason);
    for (let i = 0; i < count; i++) settle(i, undefined, reason);
  };
  const onCallerAbort = () => abort(callerSignal?.reason);
  const timer = setTimeout(() => abort(new DeadlineExceeded(timeoutMs)), timeoutMs);

  const snapshot = (): NodeOutcome[] =>
    nodeIds.map((node, i) => final[i] ?? { node, outcome: "pending", requests: requestCounts[i] as number });

  const settle = (index: number, kind: NodeOutcomeKind | undefined, error: unknown, status?: number): void => {
    if (final[index] !== undefined) return;
    const node = nodeIds[index] as string;
    const now = clock.now();
    const latencyMs = now - startedAt;
    const requests = requestCounts[index] as number;
    let outcome: NodeOutcome;
    if (kind !== undefined) outcome = { node, outcome: kind, latencyMs, requests };
    else {
      const failure = failureKind(controller.signal);
      outcome =
        status === undefined
          ? { node, outcome: failure, latencyMs, requests, error: toError(error) }
          : { node, outcome: failure, latencyMs, requests, error: toError(error), status };
    }
    final[index] = outcome;
    const waiting = outcomeWaiters[index];
    if (waiting !== undefined) for (const resolve of waiting) resolve(outcome);
    if (outcome.outcome === options.yes) yes++;
    else no++;
    options.onNodeSettled?.(outcome, index);
    if (!isDecided) {
      const decision = decide(yes, no, count, quorum);
      if (decision !== "undecided" || yes + no === count) {
        isDecided = true;
        resolveDecided({
          granted: decision === "granted",
          // The reading this answer's latency was taken from, unless a hook has run since.
          decidedAt: options.onNodeSettled ? clock.now() : now,
          outcomes: snapshot(),
          requests: requestCounts.reduce((a, b) => a + b, 0),
        });
      }
    }
    if (yes + no === count) {
      clearTimeout(timer);
      callerSignal?.removeEventListener("abort", onCallerAbort);
      // Unless it aborted, every node settled through its own task: no task uses the signal now.
      returnController(pooled);
      resolveOutcomes(final as NodeOutcome[]);
    }
  };

  const startedAt = clock.now();
  if (callerSignal?.aborted) onCallerAbort();
  else callerSignal?.addEventListener("abort", onCallerAbort, { once: true });

  const finished: Promise<void>[] = new Array(count);
  const finishedFlags: boolean[] = new Array(count);
  for (let index = 0; index < count; index++) {
    const context: TaskContext = {
      signal: controller.signal,
      countRequest: () => {
        requestCounts[index] = (requestCounts[index] as number) + 1;
        if (meter !== undefined) meter.sent++;
      },
    };
    let task: Promise<NodeOutcomeKind>;
    try {
      task = options.task(index, context);
    } catch (error) {
      task = Promise.reject(error);
    }
    finished[index] = task.then(
      (kind) => {
        finishedFlags[index] = true;
        settle(index, kind, undefined);
      },
      (error: unknown) => {
        finishedFlags[index] = true;
        const status = (error as { status?: unknown } | null)?.status;
        settle(index, undefined, error, typeof status === "number" ? status : undefined);
      },
    );
  }
  const outcomeOf = (index: number): Promise<NodeOutcome> => {
    const known = final[index];
    if (known !== undefined) return Promise.resolve(known);
    return new Promise((resolve) => {
      const waiting = outcomeWaiters[index] ?? [];
      waiting.push(resolve);
      outcomeWaiters[index] = waiting;
    });
  };
  return {
    startedAt,
    decided,
    outcomes,
    finished,
    isFinished: (index) => finishedFlags[index] === true,
    knownOutcome: (index) => final[index],
    outcomeOf,
  };
}

/** How a node that did not answer is classified: the fan-out's abort reason decides. */
function failureKind(signal: AbortSignal): NodeOutcomeKind {
  if (!signal.aborted) return "error";
  return signal.reason instanceof DeadlineExceeded ? "timeout" : "aborted";
}

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/** The part of an acquisition's fan-out that cleanup needs. */
export interface AcquireFan {
  readonly startedAt: number;
  readonly outcomes: Promise<NodeOutcome[]>;
  readonly finished: readonly Promise<void>[];
  isFinished(index: number): boolean;
  /** The node's final outcome if it is known yet, else `undefined`. */
  knownOutcome(index: number): NodeOutcome | undefined;
}
