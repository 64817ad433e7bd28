/**
 * One instrumented call of a client: an acquisition and then the lock it granted, or an extension
 * or a release by token. Its hooks are made for this call alone and handed to the core with the
 * call's options, so every report, poll and loss they are told of belongs to this call, and the
 * lock, which keeps its options, tells them of its extensions, verifications, release and loss.
 * @module
 */
import type { Attributes, Link, Span, SpanKind, SpanStatusCode, Tracer } from "@opentelemetry/api";
import type { Clock } from "../base/clock.js";
import type { RedlockError } from "../base/errors.js";
import type { AttemptReport } from "../base/report.js";
import type { RedlockHooks } from "../core/options.js";
import { ATTRIBUTE, countRequests, type Instruments, nodeAttributes } from "./telemetry.js";

/** What every call of one instrumented client shares. */
export interface Telemetry {
  readonly instruments: Instruments | undefined;
  readonly tracer: Tracer | undefined;
  readonly nodeCount: number;
}

/** The hooks a call adds to the ones its options already have. */
export type CallHooks = Required<Pick<RedlockHooks, "onAttempt" | "onPoll" | "onLockLost">>;

/** `SpanKind.INTERNAL` and `SpanStatusCode.ERROR` of the API, without importing its values. */
const INTERNAL = 0 as SpanKind.INTERNAL;
const ERROR = 2 as SpanStatusCode.ERROR;

/** Epoch milliseconds of clock reading `t`, anchored once per span so its times stay in order. */
function anchor(clock: Clock): (t: number) => number {
  const offset = Date.now() - clock.now();
  return (t) => offset + t;
}

/** The telemetry of one call. */
export class CallTelemetry {
  readonly hooks: CallHooks;
  readonly #t: Telemetry;
  readonly #clock: Clock;
  readonly #attributes: Attributes;
  readonly #startedAt: number;
  /** The acquisition's span while it runs; its context links the lock's later operations to it. */
  #span: Span | undefined;
  #links: Link[] | undefined;
  #epoch: (t: number) => number;
  #attempts = 0;
  #polls = 0;
  /** A node answered that the lock was held elsewhere, or a release handed the lock over. */
  #waited = false;
  #last: AttemptReport | undefined;
  /** The acquisition has ended (granted or failed): later acquire reports are only counted. */
  #ended: boolean;
  /** Clock reading of the grant, while the lock counts as held. */
  #heldSince: number | undefined;

  constructor(t: Telemetry, clock: Clock, attributes: Attributes, acquisition?: { ttlMs: unknown }) {
    this.#t = t;
    this.#clock = clock;
    this.#attributes = attributes;
    this.#startedAt = clock.now();
    this.#epoch = anchor(clock);
    this.#ended = acquisition === undefined;
    if (acquisition !== undefined && t.tracer !== undefined) {
      const ttl = typeof acquisition.ttlMs === "number" ? { [ATTRIBUTE.ttlMs]: acquisition.ttlMs } : {};
      this.#span = t.tracer.startSpan("edge_redlock.acquire", {
        kind: INTERNAL,
        startTime: this.#epoch(this.#startedAt),
        attributes: { ...attributes, ...ttl, [ATTRIBUTE.nodeCount]: t.nodeCount },
      });
      this.#links = [{ context: this.#span.spanContext() }];
    }
    this.hooks = {
      onAttempt: (report) => this.#attempt(report),
      onPoll: (event) => this.#poll(event),
      onLockLost: (event) => this.#lost(event.error),
    };
  }

  /** The call returned its lock (`using()`: the routine was called with it). */
  granted(): void {
    if (this.#ended) return;
    const now = this.#clock.now();
    this.#finish("acquired", now);
    this.#heldSince = now;
    this.#t.instruments?.held.add(1, this.#attributes);
  }

  /** The acquisition ended without a lock: `outcome` is the error's code (`LOCK_HELD` for `tryAcquire()`'s null). */
  failed(outcome: string): void {
    if (this.#ended) return;
    this.#finish(outcome, this.#clock.now());
  }

  #finish(outcome: string, now: number): void {
    this.#ended = true;
    const attributes = { ...this.#attributes, [ATTRIBUTE.outcome]: outcome };
    const m = this.#t.instruments;
    if (m !== undefined) {
      m.acquireDuration.record((now - this.#startedAt) / 1000, attributes);
      m.acquireAttempts.record(this.#attempts, attributes);
      m.acquirePolls.record(this.#polls, attributes);
      // Had to wait: it found the lock held, or needed more than one round to get it.
      if (this.#attempts > 1 || this.#polls > 0 || this.#waited) m.acquireContended.add(1, attributes);
    }
    const span = this.#span;
    if (span === undefined) return;
    this.#span = undefined;
    span.setAttributes({
      [ATTRIBUTE.outcome]: outcome,
      [ATTRIBUTE.attempts]: this.#attempts,
      [ATTRIBUTE.polls]: this.#polls,
    });
    if (this.#last !== undefined) span.setAttributes(voteAttributes(this.#last));
    if (outcome !== "acquired") {
      span.setAttribute(ATTRIBUTE.errorType, outcome);
      // The code alone: an error's message names the resources and may quote a node's answer.
      span.setStatus({ code: ERROR, message: outcome });
    }
    span.end(this.#epoch(now));
  }

  #attempt(report: AttemptReport): void {
    const now = this.#clock.now();
    const startedAt = now - report.elapsedMs;
    const m = this.#t.instruments;
    if (m !== undefined) countRequests(m, report.operation, report.nodes, this.#attributes);
    if (report.operation === "acquire") {
      if (this.#ended) return;
      this.#attempts++;
      this.#last = report;
      // An attempt that sent no request of its own was handed the lock by a release of its
      // isolate: the caller queued behind that holder.
      if (report.requests === 0 || report.nodes.some((n) => n.outcome === "held")) this.#waited = true;
      const span = this.#span;
      if (span !== undefined) addVoteEvents(span, report, startedAt, now, this.#epoch);
      return;
    }
    if (report.operation === "release") this.#endHold("released", startedAt);
    this.#operationSpan(report, startedAt, now);
  }

  /** A span for one extension, verification or release, made once it is decided (its report has its times). */
  #operationSpan(report: AttemptReport, startedAt: number, now: number): void {
    const tracer = this.#t.tracer;
    if (tracer === undefined) return;
    const epoch = anchor(this.#clock);
    const span = tracer.startSpan(`edge_redlock.${report.operation}`, {
      kind: INTERNAL,
      startTime: epoch(startedAt),
      attributes: { ...this.#attributes, [ATTRIBUTE.nodeCount]: this.#t.nodeCount, ...voteAttributes(report) },
      ...(this.#links === undefined ? {} : { links: this.#links }),
    });
    addVoteEvents(span, report, startedAt, now, epoch);
    if (!report.ok && report.operation === "extend") {
      span.setAttribute(ATTRIBUTE.errorType, "EXTEND_FAILED");
      span.setStatus({ code: ERROR, message: "EXTEND_FAILED" });
    }
    span.end(epoch(now));
  }

  #poll(event: Parameters<CallHooks["onPoll"]>[0]): void {
    const m = this.#t.instruments;
    if (m !== undefined) countRequests(m, "poll", [event.outcome], this.#attributes);
    if (this.#ended) return;
    this.#polls++;
    const attributes = nodeAttributes(event.outcome);
    if (event.rank !== undefined) attributes[ATTRIBUTE.rank] = event.rank;
    this.#span?.addEvent("edge_redlock.poll", attributes, this.#epoch(this.#clock.now()));
  }

  /**
   * The lock's signal aborted. A loss found by an extension or a verification carries its report
   * (the nodes no longer hold it: `not_held`); the loss timer's carries none (its validity ran
   * low with no extension: `expired`). Counted only for a lock its caller was given.
   */
  #lost(error: RedlockError): void {
    if (this.#heldSince === undefined) return;
    const reason = error.attempts.length > 0 ? "not_held" : "expired";
    this.#t.instruments?.lost.add(1, { ...this.#attributes, [ATTRIBUTE.lossReason]: reason });
    this.#endHold("lost", this.#clock.now());
  }

  /** The hold ends once, at its release's first send or its loss, whichever comes first. */
  #endHold(end: "released" | "lost", at: number): void {
    const since = this.#heldSince;
    if (since === undefined) return;
    this.#heldSince = undefined;
    const m = this.#t.instruments;
    if (m === undefined) return;
    m.holdDuration.record(Math.max(0, at - since) / 1000, { ...this.#attributes, [ATTRIBUTE.holdEnd]: end });
    m.held.add(-1, this.#attributes);
  }
}

function voteAttributes(report: AttemptReport): Attributes {
  const attributes: Attributes = {
    [ATTRIBUTE.quorum]: report.quorum,
    [ATTRIBUTE.votes]: report.votes,
    [ATTRIBUTE.ok]: report.ok,
    [ATTRIBUTE.requests]: report.requests,
  };
  if (report.validityMs !== undefined) attributes[ATTRIBUTE.validityMs] = report.validityMs;
  return attributes;
}

/** One event per node answer (at its time), then the attempt's own event at its decision. */
function addVoteEvents(
  span: Span,
  report: AttemptReport,
  startedAt: number,
  decidedAt: number,
  epoch: (t: number) => number,
): void {
  const attempt = { [ATTRIBUTE.attempt]: report.attempt };
  for (const n of report.nodes) {
    const at = n.latencyMs === undefined ? decidedAt : startedAt + n.latencyMs;
    span.addEvent("edge_redlock.node_answer", { ...attempt, ...nodeAttributes(n) }, epoch(at));
  }
  span.addEvent(
    `edge_redlock.${report.operation}_attempt`,
    { ...attempt, ...voteAttributes(report) },
    epoch(decidedAt),
  );
}
