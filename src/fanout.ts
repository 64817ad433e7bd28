/**
 * Runs one operation on every node at once and settles as soon as the vote is decided. Knows
 * nothing of HTTP: each node's work is a task that resolves with its outcome or throws.
 * @module
 */
import type { Clock } from "./clock.js";
import { decide } from "./quorum.js";
import type { NodeOutcome, NodeOutcomeKind } from "./report.js";

/** What one node's task is given. */
export interface TaskContext {
  /** Aborts at the per-request deadline or when the caller's signal aborts. */
  readonly signal: AbortSignal;
  /** Call once per HTTP request sent, so attempts can report their request count. */
  countRequest(): void;
}

/** Options of {@link fanOut}. */
export interface FanOutOptions {
  readonly nodeIds: readonly string[];
  /** The work for node `index`. Resolves with the node's outcome, or throws for a node error. */
  readonly task: (index: number, context: TaskContext) => Promise<NodeOutcomeKind>;
  /** The outcome that counts as a yes vote. */
  readonly yes: NodeOutcomeKind;
  readonly quorum: number;
  /** Deadline of each node's task, in milliseconds. */
  readonly timeoutMs: number;
  /** The caller's signal: aborting it aborts every node's task. */
  readonly signal?: AbortSignal | undefined;
  readonly clock: Clock;
  /**
   * Per node: wait for this before starting the task; its deadline starts only then. Release uses
   * it to wait until a straggling acquire request to the node has finished.
   */
  readonly startAfter?: ((index: number) => Promise<unknown>) | undefined;
  /** Called once per node when its task settles, also after the vote was decided. */
  readonly onNodeSettled?: ((outcome: NodeOutcome) => void) | undefined;
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
  /** Per node: resolves with its final outcome. Never rejects. */
  readonly outcomes: readonly Promise<NodeOutcome>[];
  /**
   * Per node: resolves when the node's task itself has finished, which can be later than its
   * outcome if the task ignored the abort. Use it to clean up after a request that may still land.
   */
  readonly finished: readonly Promise<void>[];
}

class DeadlineExceeded extends Error {
  constructor(timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
    this.name = "TimeoutError";
  }
}

/** Start the operation on every node. */
export function fanOut(options: FanOutOptions): FanOut {
  const { nodeIds, quorum, clock } = options;
  const snapshot: NodeOutcome[] = nodeIds.map((node) => ({ node, outcome: "pending", requests: 0 }));
  const requestCounts = nodeIds.map(() => 0);
  let yes = 0;
  let no = 0;
  let resolveDecided!: (decided: Decided) => void;
  const decided = new Promise<Decided>((resolve) => {
    resolveDecided = resolve;
  });
  let isDecided = false;
  const settleIfDecided = () => {
    if (isDecided) return;
    const decision = decide(yes, no, nodeIds.length, quorum);
    if (decision === "undecided" && yes + no < nodeIds.length) return;
    isDecided = true;
    resolveDecided({
      granted: decision === "granted",
      decidedAt: clock.now(),
      outcomes: snapshot.slice(),
      requests: requestCounts.reduce((a, b) => a + b, 0),
    });
  };

  const startedAt = clock.now();
  const outcomes: Promise<NodeOutcome>[] = [];
  const finished: Promise<void>[] = [];
  nodeIds.forEach((node, index) => {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onCallerAbort = () => controller.abort(options.signal?.reason);
    if (options.signal?.aborted) onCallerAbort();
    else options.signal?.addEventListener("abort", onCallerAbort, { once: true });

    const context: TaskContext = {
      signal: controller.signal,
      countRequest: () => {
        requestCounts[index] = (requestCounts[index] ?? 0) + 1;
      },
    };
    const start = (): Promise<NodeOutcomeKind> => {
      timer = setTimeout(() => controller.abort(new DeadlineExceeded(options.timeoutMs)), options.timeoutMs);
      return options.task(index, context);
    };
    const task = options.startAfter ? options.startAfter(index).then(start, start) : invoke(start);
    // The outcome is whichever comes first: the task's answer or its abort. A task that ignores
    // its signal must not hold up the vote.
    const aborted = new Promise<never>((_, reject) => {
      const onAbort = () => reject(controller.signal.reason);
      if (controller.signal.aborted) onAbort();
      else controller.signal.addEventListener("abort", onAbort, { once: true });
    });
    const outcome = Promise.race([task, aborted]).then(
      (kind): NodeOutcome => ({
        node,
        outcome: kind,
        latencyMs: clock.now() - startedAt,
        requests: requestCounts[index] ?? 0,
      }),
      (error: unknown): NodeOutcome => {
        const reason = controller.signal.aborted ? controller.signal.reason : undefined;
        const kind: NodeOutcomeKind =
          reason === undefined ? "error" : reason instanceof DeadlineExceeded ? "timeout" : "aborted";
        const status = (error as { status?: unknown } | null)?.status;
        return {
          node,
          outcome: kind,
          latencyMs: clock.now() - startedAt,
          requests: requestCounts[index] ?? 0,
          error: toError(reason ?? error),
          ...(typeof status === "number" ? { status } : {}),
        };
      },
    );
    outcomes.push(
      outcome.then((result) => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onCallerAbort);
        snapshot[index] = result;
        if (result.outcome === options.yes) yes++;
        else no++;
        options.onNodeSettled?.(result);
        settleIfDecided();
        return result;
      }),
    );
    finished.push(task.then(noop, noop));
  });
  return { startedAt, decided, outcomes, finished };
}

function noop(): void {}

function invoke<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return fn();
  } catch (error) {
    return Promise.reject(error);
  }
}

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
