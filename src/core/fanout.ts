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
import type { NodeOutcome, NodeOutcomeKind, Operation } from "../base/report.js";
import { borrowController, type PooledController, returnController } from "./abort-controllers.js";
import { decide } from "./quorum.js";

/** What one node's task is given. */
export interface TaskContext {
  /** Aborts at the fan-out's deadline or when the caller's signal aborts. */
  readonly signal: AbortSignal;
  /** Call once per HTTP request sent, so attempts can report their request count. */
  countRequest(): void;
}

/**
 * What one `acquire()` call's request budget counts: every request the call sends until it
 * returns, through every fan-out it makes (its attempts, its polls, the cluster check, script
 * fallbacks) and through the background work it starts meanwhile (leaving the gate's line, the
 * cleanup of a failed attempt). What that background work sends after the call returned is not
 * the call's: `settled()` covers it.
 */
export interface RequestMeter {
  /**
   * Requests sent so far, and those the cleanup of a failed attempt already owes: one per node
   * that may need undoing, counted when the attempt fails, before the last answers are in.
   */
  sent: number;
  /** Set once the call has returned (see `endCall`): background work is then no longer bounded by its budget. */
  returned?: boolean;
}

/** The call metered by `meter` has returned. */
export function endCall(meter: RequestMeter | undefined): void {
  if (meter !== undefined) meter.returned = true;
}

/** Options of {@link fanOut}. */
export interface FanOutOptions {
  readonly nodeIds: readonly string[];
  /**
   * The work for node `index`. Resolves with the node's outcome (or, with `read`, what `read`
   * takes), or throws for a node error.
   */
  readonly task: (index: number, context: TaskContext) => Promise<unknown>;
  /**
   * Reads what a task resolved with (a node's raw reply) as the node's outcome; a throw is the
   * node's error. It runs in the fan-out's own reaction to the task: a task that read its reply
   * itself would add a promise and a reaction per node. @default what the task resolved with is
   * its outcome
   */
  readonly read?: ((result: unknown, index: number) => NodeOutcomeKind) | undefined;
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
  /**
   * The `onNodeError` hook: told of every node whose outcome is `error` or `timeout`, with
   * `operation` and `resources` (fields rather than a closure per fan-out). A throw is ignored.
   */
  readonly onNodeError?:
    | ((event: { operation: Operation; resources: readonly string[]; outcome: NodeOutcome }) => void)
    | undefined;
  /** The operation named to `onNodeError`. @default "acquire" */
  readonly operation?: Operation | undefined;
  /** The resources named to `onNodeError`. @default [] */
  readonly resources?: readonly string[] | undefined;
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
  return new Run(options);
}

/**
 * One node's part in a fan-out: its task's context, its request count and its outcome. One object
 * per node, with methods on the prototype, because a fan-out runs twice per acquire + release: a
 * context object, a closure per node and arrays indexed by node cost the client measurably more
 * (allocation and garbage collection) than this.
 */
class NodeRun implements TaskContext {
  requests = 0;
  /** The task itself has finished (see {@link FanOut.isFinished}). */
  finished = false;
  outcome: NodeOutcome | undefined;
  /** The reaction to the task's promise: resolves once the task has finished (see {@link FanOut.finished}). */
  done: Promise<void> | undefined;
  /** Resolvers of `outcomeOf(index)` calls made before the outcome was known (rare: made on demand). */
  waiters: ((outcome: NodeOutcome) => void)[] | undefined;
  readonly fan: Run;
  readonly index: number;

  constructor(fan: Run, index: number) {
    this.fan = fan;
    this.index = index;
  }

  get signal(): AbortSignal {
    return this.fan.signal;
  }

  countRequest(): void {
    this.requests++;
    const meter = this.fan.options.meter;
    if (meter !== undefined) meter.sent++;
  }
}

/** A running fan-out (see {@link FanOut}). */
class Run implements FanOut {
  readonly options: FanOutOptions;
  readonly startedAt: number;
  readonly decided: Promise<Decided>;
  readonly controller: AbortController;
  /** The controller's signal, read once: on Node its getter is not free, and every request reads it. */
  readonly signal: AbortSignal;
  readonly #pooled: PooledController;
  readonly #nodes: NodeRun[];
  readonly #timer: ReturnType<typeof setTimeout>;
  #yes = 0;
  #no = 0;
  #isDecided = false;
  #resolveDecided!: (decided: Decided) => void;
  #finished: Promise<void>[] | undefined;
  /** Made when first asked for: most callers only read `decided`. */
  #outcomes: Promise<NodeOutcome[]> | undefined;
  #resolveOutcomes: ((outcomes: NodeOutcome[]) => void) | undefined;
  /** Listens to the caller's signal, when one was given. */
  #onCallerAbort: (() => void) | undefined;

  constructor(options: FanOutOptions) {
    this.options = options;
    const count = options.nodeIds.length;
    this.decided = new Promise<Decided>((resolve) => {
      this.#resolveDecided = resolve;
    });
    this.#pooled = borrowController();
    this.controller = this.#pooled.controller;
    this.signal = this.controller.signal;
    const nodes: NodeRun[] = new Array(count);
    for (let i = 0; i < count; i++) nodes[i] = new NodeRun(this, i);
    this.#nodes = nodes;
    // The fan-out goes to the timer as its argument: no closure per fan-out.
    this.#timer = setTimeout(deadlineReached, options.timeoutMs, this);

    this.startedAt = options.clock.now();
    const callerSignal = options.signal;
    if (callerSignal !== undefined) {
      const onCallerAbort = () => this.#abort(callerSignal.reason);
      if (callerSignal.aborted) onCallerAbort();
      else {
        this.#onCallerAbort = onCallerAbort;
        callerSignal.addEventListener("abort", onCallerAbort, { once: true });
      }
    }

    const read = options.read;
    for (let index = 0; index < count; index++) {
      const node = nodes[index] as NodeRun;
      let task: Promise<unknown>;
      try {
        task = options.task(index, node);
      } catch (error) {
        task = Promise.reject(error);
      }
      // `then` with two closures costs less than an async function awaiting the task (measured:
      // an await allocates more than a reaction does).
      node.done = task.then(
        (result) => {
          node.finished = true;
          let kind: NodeOutcomeKind;
          try {
            kind = read === undefined ? (result as NodeOutcomeKind) : read(result, index);
          } catch (error) {
            this.#fail(node, error);
            return;
          }
          this.settle(node, kind, undefined);
        },
        (error: unknown) => {
          node.finished = true;
          this.#fail(node, error);
        },
      );
    }
  }

  /** Made when first asked for: only the cleanup after a request without an answer reads it. */
  get finished(): readonly Promise<void>[] {
    this.#finished ??= this.#nodes.map((node) => node.done as Promise<void>);
    return this.#finished;
  }

  get outcomes(): Promise<NodeOutcome[]> {
    if (this.#outcomes === undefined) {
      this.#outcomes =
        this.#yes + this.#no === this.#nodes.length
          ? Promise.resolve(this.#final())
          : new Promise((resolve) => {
              this.#resolveOutcomes = resolve;
            });
    }
    return this.#outcomes;
  }

  isFinished(index: number): boolean {
    return this.#nodes[index]?.finished === true;
  }

  knownOutcome(index: number): NodeOutcome | undefined {
    return this.#nodes[index]?.outcome;
  }

  outcomeOf(index: number): Promise<NodeOutcome> {
    const node = this.#nodes[index] as NodeRun;
    const known = node.outcome;
    if (known !== undefined) return Promise.resolve(known);
    return new Promise((resolve) => {
      node.waiters ??= [];
      node.waiters.push(resolve);
    });
  }

  /** The fan-out's deadline passed. */
  expire(): void {
    this.#abort(new DeadlineExceeded(this.options.timeoutMs));
  }

  /**
   * The outcome is whichever comes first: the task's answer or the abort. A task that ignores its
   * signal must not hold up the vote; `finished` still tracks it.
   */
  #abort(reason: unknown): void {
    // Once every node settled the controller may serve another fan-out: never abort it from here.
    if (this.#yes + this.#no === this.#nodes.length || this.signal.aborted) return;
    this.controller.abort(reason);
    for (const node of this.#nodes) this.settle(node, undefined, reason);
  }

  #fail(node: NodeRun, error: unknown): void {
    const status = (error as { status?: unknown } | null)?.status;
    this.settle(node, undefined, error, typeof status === "number" ? status : undefined);
  }

  /** Records `node`'s outcome, unless it is known already, and decides the vote when it can. */
  settle(node: NodeRun, kind: NodeOutcomeKind | undefined, error: unknown, status?: number): void {
    if (node.outcome !== undefined) return;
    const options = this.options;
    const id = options.nodeIds[node.index] as string;
    const now = options.clock.now();
    const latencyMs = now - this.startedAt;
    const requests = node.requests;
    let outcome: NodeOutcome;
    if (kind !== undefined) outcome = { node: id, outcome: kind, latencyMs, requests };
    else {
      const failure = failureKind(this.signal);
      outcome =
        status === undefined
          ? { node: id, outcome: failure, latencyMs, requests, error: toError(error) }
          : { node: id, outcome: failure, latencyMs, requests, error: toError(error), status };
    }
    node.outcome = outcome;
    const waiting = node.waiters;
    if (waiting !== undefined) for (const resolve of waiting) resolve(outcome);
    if (outcome.outcome === options.yes) this.#yes++;
    else this.#no++;
    const hooked =
      (options.onNodeSettled !== undefined || options.onNodeError !== undefined) &&
      this.#callHooks(outcome, node.index);
    const count = this.#nodes.length;
    const settled = this.#yes + this.#no;
    if (!this.#isDecided) {
      const decision = decide(this.#yes, this.#no, count, options.quorum);
      if (decision !== "undecided" || settled === count) {
        this.#isDecided = true;
        this.#resolveDecided({
          granted: decision === "granted",
          // The reading this answer's latency was taken from, unless a hook has run since.
          decidedAt: hooked ? options.clock.now() : now,
          outcomes: this.#snapshot(),
          requests: this.#requests(),
        });
      }
    }
    if (settled === count) {
      clearTimeout(this.#timer);
      if (this.#onCallerAbort !== undefined) options.signal?.removeEventListener("abort", this.#onCallerAbort);
      // Unless it aborted, every node settled through its own task: no task uses the signal now.
      returnController(this.#pooled);
      this.#resolveOutcomes?.(this.#final());
    }
  }

  /** Tells the hooks of `outcome`; whether any was called (time may have passed in it). */
  #callHooks(outcome: NodeOutcome, index: number): boolean {
    const { onNodeSettled, onNodeError } = this.options;
    onNodeSettled?.(outcome, index);
    const failed = onNodeError !== undefined && (outcome.outcome === "error" || outcome.outcome === "timeout");
    if (failed) {
      try {
        onNodeError({
          operation: this.options.operation ?? "acquire",
          resources: this.options.resources ?? [],
          outcome,
        });
      } catch {
        // A hook must never break locking (documented on RedlockHooks).
      }
    }
    return onNodeSettled !== undefined || failed;
  }

  /** Every node's outcome at this moment; nodes still in flight are `pending`. */
  #snapshot(): NodeOutcome[] {
    const nodes = this.#nodes;
    const outcomes: NodeOutcome[] = new Array(nodes.length);
    for (let i = 0; i < nodes.length; i++) {
      const node = nodes[i] as NodeRun;
      outcomes[i] = node.outcome ?? {
        node: this.options.nodeIds[i] as string,
        outcome: "pending",
        requests: node.requests,
      };
    }
    return outcomes;
  }

  /** Every node's final outcome, once all are known. */
  #final(): NodeOutcome[] {
    return this.#nodes.map((node) => node.outcome as NodeOutcome);
  }

  #requests(): number {
    let sum = 0;
    for (const node of this.#nodes) sum += node.requests;
    return sum;
  }
}

function deadlineReached(fan: Run): void {
  fan.expire();
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
