/**
 * What every operation runs on: the nodes, options resolved once per TTL, a vote over all nodes
 * with the hooks wired in, and the background work. Internal.
 * @module
 */

import { type Clock, monotonicClock } from "../base/clock.js";
import type { AttemptReport, NodeOutcome, NodeOutcomeKind, Operation } from "../base/report.js";
import type { RedisNode } from "../transport/rest.js";
import { BackgroundWork } from "./background.js";
import { type Decided, type FanOut, fanOut, type RequestMeter, type TaskContext } from "./fanout.js";
import { type RedlockOptions, type ResolvedOptions, resolveOptions } from "./options.js";
import { validityMs } from "./quorum.js";
import { validateTtl } from "./validate.js";

/** One operation to run on every node. */
export interface VoteSpec {
  /** The outcome that counts as a yes vote. */
  readonly yes: NodeOutcomeKind;
  /** Node `index`'s work: resolves with its outcome (with `read`, what `read` takes). See `FanOutOptions`. */
  readonly task: (index: number, context: TaskContext) => Promise<unknown>;
  /** Reads a task's result as its node's outcome (see `FanOutOptions.read`). @default the result is the outcome */
  readonly read?: ((result: unknown, index: number) => NodeOutcomeKind) | undefined;
  readonly signal?: AbortSignal | undefined;
  /**
   * Validity is measured from this clock reading instead of the fan-out's own start: an
   * acquisition whose gate node was taken by an earlier poll counts from that poll's send.
   */
  readonly startedAt?: number | undefined;
  /** Polls of the gate made while waiting before this attempt, for its report. */
  readonly polls?: number | undefined;
  /** The fan-out's deadline, when not the request deadline. */
  readonly timeoutMs?: number | undefined;
  /** The acquisition whose requests these are (see `RequestMeter`). */
  readonly meter?: RequestMeter | undefined;
}

/** A decided vote with its report. `deadline` is `t0 + ttl - drift` when a TTL was given. */
export interface Vote {
  readonly report: AttemptReport;
  readonly fan: FanOut;
  readonly startedAt: number;
  readonly decidedAt: number;
  readonly deadline: number;
}

const MAX_CACHED_TTLS = 32;

/** The shared machinery of one `Redlock` client. */
export class Engine {
  readonly nodes: readonly RedisNode[];
  readonly nodeIds: readonly string[];
  readonly background = new BackgroundWork();
  /** The client's clock (the `clock` option): the one every reading it compares comes from. */
  readonly clock: Clock;
  readonly #base: RedlockOptions;
  /** Options resolved per TTL for calls without overrides: resolving is a measurable cost per call. */
  readonly #resolved = new Map<number, ResolvedOptions>();

  /**
   * What the client's nodes reach (see `identity.ts`), as an in-memory key, never shown: two
   * clients of the same nodes share it, so a `using()` routine's hold is seen by both.
   */
  readonly #scope: string;

  constructor(nodes: readonly RedisNode[], base: RedlockOptions, scope = "") {
    this.nodes = nodes;
    this.#scope = scope;
    this.nodeIds = nodes.map((n) => n.id);
    this.#base = base;
    this.clock = base.clock ?? monotonicClock;
  }

  /** Keys as this client's cluster names them in an async context (see `nesting.ts`). */
  scoped(keys: readonly string[]): string[] {
    return keys.map((key) => `${this.#scope}\n${key}`);
  }

  /** The client's options merged with a call's overrides, for a TTL (not validated against it). */
  resolve(overrides: RedlockOptions | undefined, ttlMs: number): ResolvedOptions {
    if (overrides !== undefined) return resolveOptions(this.#base, overrides, ttlMs, this.nodes.length);
    let resolved = this.#resolved.get(ttlMs);
    if (resolved === undefined) {
      if (this.#resolved.size >= MAX_CACHED_TTLS) this.#resolved.clear();
      resolved = Object.freeze(resolveOptions(this.#base, undefined, ttlMs, this.nodes.length));
      this.#resolved.set(ttlMs, resolved);
    }
    return resolved;
  }

  /** Resolve the options for a TTL given by the caller, validating the TTL against them. */
  resolveWithTtl(overrides: RedlockOptions | undefined, ttlMs: number): ResolvedOptions {
    validateTtl(ttlMs);
    const o = this.resolve(overrides, ttlMs);
    validateTtl(ttlMs, o);
    return o;
  }

  /** A lock's own options, with a call's overrides on top when there are any. */
  resolveFor(lockOptions: ResolvedOptions, overrides: RedlockOptions | undefined, ttlMs: number): ResolvedOptions {
    return overrides === undefined ? lockOptions : resolveOptions(lockOptions, overrides, ttlMs, this.nodes.length);
  }

  /** Start `spec` on every node with the options' deadline and quorum; node errors go to `onNodeError`. */
  fan(
    o: ResolvedOptions,
    operation: Operation,
    resources: readonly string[],
    spec: VoteSpec,
    timeoutMs = o.requestTimeoutMs,
    only?: readonly number[],
  ): FanOut {
    const read = spec.read;
    // `only`: a fan-out to some nodes (e.g. the gate alone), each still known by its index.
    return fanOut({
      nodeIds: only ? only.map((i) => this.nodeIds[i] as string) : this.nodeIds,
      quorum: only ? only.length : o.quorum,
      timeoutMs,
      clock: o.clock,
      yes: spec.yes,
      task: only ? (i, context) => spec.task(only[i] as number, context) : spec.task,
      read: only && read ? (result, i) => read(result, only[i] as number) : read,
      signal: spec.signal,
      meter: spec.meter,
      onNodeError: o.onNodeError,
      operation,
      resources,
    });
  }

  /**
   * Run one operation on every node, decide it, and report it. With `ttlMs`, also compute the
   * validity and the deadline it gives (`t0 + ttl - drift`, anchored before the first send).
   */
  vote(
    o: ResolvedOptions,
    operation: Operation,
    resources: readonly string[],
    attempt: number,
    ttlMs: number | undefined,
    spec: VoteSpec,
  ): Promise<Vote> {
    let fan: FanOut;
    try {
      fan = this.fan(o, operation, resources, spec, spec.timeoutMs);
    } catch (error) {
      return Promise.reject(error);
    }
    // A reaction rather than an async function: it runs twice per acquire + release, and an
    // async layer costs a promise and a suspended frame more.
    return fan.decided.then((decided) => voted(o, operation, resources, attempt, ttlMs, spec, fan, decided));
  }

  node(index: number): RedisNode {
    return this.nodes[index] as RedisNode;
  }
}

/** The vote of `fan`, decided: its report (given to `onAttempt`), validity and deadline. */
function voted(
  o: ResolvedOptions,
  operation: Operation,
  resources: readonly string[],
  attempt: number,
  ttlMs: number | undefined,
  spec: VoteSpec,
  fan: FanOut,
  decided: Decided,
): Vote {
  const startedAt = Math.min(spec.startedAt ?? fan.startedAt, fan.startedAt);
  const validity = ttlMs === undefined ? undefined : validityMs(ttlMs, startedAt, decided.decidedAt, o.driftFactor);
  // Optional fields are assigned rather than spread: this runs twice per acquire + release.
  const report: { -readonly [K in keyof AttemptReport]: AttemptReport[K] } = {
    operation,
    attempt,
    resources,
    quorum: o.quorum,
    votes: countYes(decided.outcomes, spec.yes),
    elapsedMs: decided.decidedAt - startedAt,
    ok: decided.granted && (validity === undefined || validity > o.minValidityMs),
    nodes: decided.outcomes,
    requests: decided.requests,
  };
  if (validity !== undefined) report.validityMs = validity;
  if (spec.polls) report.polls = spec.polls;
  callHook(o.onAttempt, report);
  return {
    report,
    fan,
    startedAt,
    decidedAt: decided.decidedAt,
    deadline: decided.decidedAt + (validity ?? 0),
  };
}

function countYes(outcomes: readonly NodeOutcome[], yes: NodeOutcomeKind): number {
  let votes = 0;
  for (const outcome of outcomes) if (outcome.outcome === yes) votes++;
  return votes;
}

/** Call a user hook; an exception thrown by a hook must never break locking. */
export function callHook<T>(hook: ((event: T) => void) | undefined, event: T): void {
  if (hook === undefined) return;
  try {
    hook(event);
  } catch {
    // Swallowed on purpose (documented on RedlockHooks).
  }
}
