/**
 * One `acquire()` call's waiter: what it was asked for (fixed for the call) and its state (one
 * plain object, changed by the waiting modules as polls and attempts come back).
 * @module
 */

import type { AttemptReport } from "../base/report.js";
import { attemptCost, requestsOf } from "../core/backoff-waiting.js";
import type { Engine } from "../core/engine.js";
import type { LockOperations } from "../core/lock.js";
import type { AcquireRequest, ResolvedOptions } from "../core/options.js";
import { randomToken } from "../core/token.js";
import type { HotResources } from "../isolate/hot-resources.js";
import { gateIndex, hotKeyOf } from "./gate.js";
import type { Overdue } from "./pacing.js";

/**
 * Everything a waiter learns and remembers while it waits, in one place. Its phase is not here: the
 * driver holds it (see `waiter.ts`), and only `phases.transition` changes it.
 */
export interface WaiterState {
  /** Fan-outs made so far (polls of the gate are not attempts). */
  attempts: number;
  /** Polls of the gate since the last attempt, for that attempt's report. */
  polls: number;
  /** When the latest polls were sent, oldest first: as many as `pacing.rateGap` looks back on. */
  recentPolls: number[];
  /** Our place in line at the last answer (0 first, -1 out of line). */
  rank: number;
  /** Our ticket in the gate's line (0 before the gate gave one), under which our isolate tells us our turn. */
  ticket: number;
  /** Average poll round trip, in ms (0 before the first). */
  rttMs: number;
  /** The gate did not answer a poll: waiting falls back to fan-outs until it answers again. */
  gateDown: boolean;
  /** Another resource set that shares keys with ours holds them (see `GateAnswer.contested`). */
  foreign: boolean;
  /** Whether the gate's line holds an entry of ours (to leave when we are done another way). */
  inLine: boolean;
  /** Whether the gate's last answer had us first in line. */
  firstInLine: boolean;
  /** When a poll first found us first in line (reset when we are not). */
  headSince: number | undefined;
  /** When our place in line runs out unless we poll again (the lease of our last poll, from its send). */
  leaseUntil: number;
  /** The gate's last word on the average interval between takes. */
  holdMs: number;
  /** The gate's last word on the average interval between releases with waiters in line (0 while unknown). */
  cycleMs: number;
  /** The gate's count of releases at our last poll (-1 before the first). */
  lastTurns: number;
  /** Since when polls have found the current holder past the gate's prediction (see `pacing.nextOverdue`). */
  overdue: Overdue | undefined;
  /** Waiting without progress (no release seen at the gate) ends after this clock reading. */
  patienceUntil: number;
  /** The patience ran out during a sleep and the waiter has polled once since (see `limits.pause`). */
  lookedPastPatience: boolean;
  /** When the placeholder we left on the gate runs out (see `gate-client.growPlaceholder`). */
  placeholderUntil: number;
  /**
   * When the keys of a holder that won without the gate run out, as our latest probe of another
   * node read them (see `probes.keptOutOfStep`): the budget's spacing does not put a poll past it.
   * 0 before any probe; `-Infinity` once keys outlived the expiry read (the holder extends them);
   * `Infinity` for keys without a TTL.
   */
  heldElsewhereUntil: number;
  /** The token of a placeholder we may have left on the gate. */
  placeholderToken: string | undefined;
  /** Takes of the gate in a row, by anyone, that found it free with no release since the take before (from our last take). */
  unreleasedTakes: number;
  /** Times a take of ours found the others holding another token. */
  outOfStep: number;
}

/** Numbers this process's acquisitions and racing fan-outs: their entries among a client's busy keys. */
let entries = 0;

/** A fresh id for an entry among the isolate's busy keys (see `HotResources.occupy`). */
export function nextEntryId(kind: "acquiring" | "racing"): string {
  return `${kind}:${++entries}`;
}

/** One `acquire()` call that may wait: its request and limits, the reports of its attempts, and its state. */
export class Waiter {
  readonly engine: Engine;
  /** What this isolate knows of its resources' contention, shared by the clients of one cluster. */
  readonly hot: HotResources;
  readonly request: AcquireRequest;
  readonly o: ResolvedOptions;
  readonly maxAttempts: number;
  readonly signal: AbortSignal | undefined;
  readonly operations: LockOperations;
  /** The reports of every attempt made, in order. */
  readonly reports: AttemptReport[] = [];
  /** The name of the key set in the isolate's hot resources (see `hotKeyOf`). */
  readonly hotKey: string;
  /** Clock reading when the call started. */
  readonly startedAt: number;
  /** The acquire deadline (`acquireTimeoutMs` from the start), or +Infinity. */
  readonly deadline: number;
  readonly state: WaiterState;
  #gateIndex: number | undefined;
  #waiterId: string | undefined;

  constructor(
    engine: Engine,
    hot: HotResources,
    request: AcquireRequest,
    maxAttempts: number,
    signal: AbortSignal | undefined,
    operations: LockOperations,
  ) {
    this.engine = engine;
    this.hot = hot;
    this.request = request;
    this.o = request.options;
    this.maxAttempts = maxAttempts;
    this.signal = signal;
    this.operations = operations;
    this.hotKey = hotKeyOf(request.keys);
    const now = this.o.clock.now();
    this.startedAt = now;
    this.deadline = this.o.acquireTimeoutMs === undefined ? Number.POSITIVE_INFINITY : now + this.o.acquireTimeoutMs;
    this.state = {
      attempts: 0,
      polls: 0,
      recentPolls: [],
      rank: -1,
      ticket: 0,
      rttMs: 0,
      gateDown: false,
      foreign: false,
      inLine: false,
      firstInLine: false,
      headSince: undefined,
      leaseUntil: 0,
      holdMs: 0,
      cycleMs: 0,
      lastTurns: -1,
      overdue: undefined,
      patienceUntil: Number.POSITIVE_INFINITY,
      lookedPastPatience: false,
      placeholderUntil: 0,
      heldElsewhereUntil: 0,
      placeholderToken: undefined,
      unreleasedTakes: 0,
      outOfStep: 0,
    };
  }

  /** The gate node's index: hashed only when this call first needs the gate. */
  get gate(): number {
    this.#gateIndex ??= gateIndex(this.request.keys, this.engine.nodes.length);
    return this.#gateIndex;
  }

  /** This call's identity in the gate's queue, made when it first waits (or taken from a kept place). */
  get waiterId(): string {
    this.#waiterId ??= randomToken();
    return this.#waiterId;
  }

  set waiterId(id: string) {
    this.#waiterId = id;
  }

  /**
   * Whether a release may hand this lock over: a plain lock of one resource (see `offers.ts`). A
   * hand-over sets the keys in the release's own step, which a fenced lock's two phases cannot
   * ride on.
   */
  get offersHandoff(): boolean {
    return this.request.keys.length === 1 && !this.o.fencing;
  }

  /** Requests the fan-out of a take may send: one per node, two per node when fenced. */
  get takeCost(): number {
    return attemptCost(this.request, this.engine.nodes.length);
  }

  /**
   * Whether leaving the gate's line would send a request (see `gate-client.leave`): while the
   * waiter stands in the line or keeps a placeholder there, and the gate answers.
   */
  get owesLeave(): boolean {
    const s = this.state;
    return (s.inLine || s.placeholderToken !== undefined) && !s.gateDown;
  }

  /**
   * Requests this call has sent so far (see `RequestMeter`), and the leave it owes (see
   * {@link owesLeave}): sent before the call returns, when it was granted otherwise than by the
   * gate's take.
   */
  requestsSent(): number {
    return (this.request.meter?.sent ?? requestsOf(this.reports)) + (this.owesLeave ? 1 : 0);
  }

  now(): number {
    return this.o.clock.now();
  }
}
