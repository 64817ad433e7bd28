/**
 * The instruments and attribute names of `edge-redlock/otel`, made once per `instrument()` call.
 * Names follow OpenTelemetry's semantic-convention rules: lowercase, dot-separated namespaces
 * under `edge_redlock`, snake_case words, durations in seconds (`s`), counts in curly-brace
 * annotations (`{request}`), UpDownCounter names not pluralized.
 *
 * What may become an attribute is decided here: node ids (a URL without credentials or the id a
 * node was given), outcome kinds, error codes, counts and times. Never a lock token, a REST token,
 * an error message or a Redis error text, and a resource name only through the caller's mapping.
 * @module
 */
import type { Attributes, Counter, Histogram, Meter, UpDownCounter, ValueType } from "@opentelemetry/api";
import type { NodeOutcome } from "../base/report.js";

/** The attribute keys of the metrics, spans and span events, in one place. */
export const ATTRIBUTE = Object.freeze({
  /** What `resourceAttribute` maps a lock's resources to (absent without it). */
  resource: "edge_redlock.resource",
  /** How an acquisition ended: `acquired`, or the error's code (`LOCK_HELD`, `REQUEST_BUDGET`, …). */
  outcome: "edge_redlock.outcome",
  /** The operation a request belongs to: `acquire`, `extend`, `release`, `verify` or `poll`. */
  operation: "edge_redlock.operation",
  /** A node's id: its URL without credentials, or the `id` it was given. */
  node: "edge_redlock.node",
  /** What a node answered: `acquired`, `held`, `released`, `error`, `timeout`, `pending`, … */
  nodeOutcome: "edge_redlock.node.outcome",
  /** Why a lock was lost: `expired` (no extension in time) or `not_held` (the nodes no longer hold it). */
  lossReason: "edge_redlock.loss.reason",
  /** How a hold ended: `released` or `lost`. */
  holdEnd: "edge_redlock.hold.end",
  /** Votes a grant needs. */
  quorum: "edge_redlock.quorum",
  /** Nodes of the client. */
  nodeCount: "edge_redlock.node_count",
  /** Nodes that said yes when the operation was decided. */
  votes: "edge_redlock.votes",
  /** Validity left when it was decided, in milliseconds (acquire, extend). */
  validityMs: "edge_redlock.validity_ms",
  /** The TTL asked for, in milliseconds. */
  ttlMs: "edge_redlock.ttl_ms",
  /** The 1-based number of an attempt. */
  attempt: "edge_redlock.attempt",
  /** Attempts an acquisition made. */
  attempts: "edge_redlock.attempts",
  /** Polls of the gate an acquisition made. */
  polls: "edge_redlock.polls",
  /** Whether the operation succeeded on a quorum. */
  ok: "edge_redlock.ok",
  /** Time from the operation's start to a node's answer, in milliseconds. */
  latencyMs: "edge_redlock.latency_ms",
  /** Requests sent to a node for its answer (2 when a script was sent again after NOSCRIPT). */
  requests: "edge_redlock.requests",
  /** A poll's place in line (0 first). */
  rank: "edge_redlock.rank",
  /** The error code of a failed operation (OpenTelemetry's `error.type`). */
  errorType: "error.type",
  /** The HTTP status of a node's error answer. */
  httpStatus: "http.response.status_code",
});

/** The metric names (docs/observability.md has the table). */
export const METRIC = Object.freeze({
  /** Histogram, `s`: time an `acquire()`, `tryAcquire()` or `using()` call waited for its lock, by outcome. */
  acquireDuration: "edge_redlock.acquire.duration",
  /** Histogram, `{attempt}`: attempts (fan-outs to every node) per acquisition, by outcome. */
  acquireAttempts: "edge_redlock.acquire.attempts",
  /** Histogram, `{poll}`: polls of the gate per acquisition, by outcome. */
  acquirePolls: "edge_redlock.acquire.polls",
  /** Counter, `{acquisition}`: acquisitions that had to wait (found the lock held, were handed it by a release of their isolate, or needed more than one round), by outcome. */
  acquireContended: "edge_redlock.acquire.contended",
  /** Histogram, `s`: time from a grant to its release or loss, by how it ended. */
  holdDuration: "edge_redlock.lock.hold.duration",
  /** UpDownCounter, `{lock}`: locks granted and not yet released or lost. */
  held: "edge_redlock.lock.held",
  /** Counter, `{lock}`: locks lost, by reason. */
  lost: "edge_redlock.lock.lost",
  /** Counter, `{request}`: requests to each node, by operation and the node's outcome. */
  requests: "edge_redlock.node.requests",
});

/** The operations a request is counted under: the library's own, and the polls of a waiting acquisition. */
export type CountedOperation = "acquire" | "extend" | "release" | "verify" | "inspect" | "poll";

// Bucket boundaries given as advice (an SDK view can replace them). Waits: the HTTP duration
// buckets of the semantic conventions; holds last longer; counts are small integers.
const WAIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
const HOLD_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
const COUNT_BUCKETS = [1, 2, 3, 4, 5, 10, 20, 50, 100];
/** `ValueType.INT` of the API, without importing its value (the API stays a type-only dependency). */
const INT = 0 as ValueType.INT;

/** The instruments of one `instrument()` call. */
export interface Instruments {
  readonly acquireDuration: Histogram;
  readonly acquireAttempts: Histogram;
  readonly acquirePolls: Histogram;
  readonly acquireContended: Counter;
  readonly holdDuration: Histogram;
  readonly held: UpDownCounter;
  readonly lost: Counter;
  readonly requests: Counter;
}

/** Create every instrument on `meter`. */
export function createInstruments(meter: Meter): Instruments {
  return {
    acquireDuration: meter.createHistogram(METRIC.acquireDuration, {
      description: "Time an acquire(), tryAcquire() or using() call waited for its lock, by outcome",
      unit: "s",
      advice: { explicitBucketBoundaries: WAIT_BUCKETS },
    }),
    acquireAttempts: meter.createHistogram(METRIC.acquireAttempts, {
      description: "Attempts (fan-outs to every node) one acquisition made, by outcome",
      unit: "{attempt}",
      valueType: INT,
      advice: { explicitBucketBoundaries: COUNT_BUCKETS },
    }),
    acquirePolls: meter.createHistogram(METRIC.acquirePolls, {
      description: "Polls of the gate node one acquisition made while waiting in line, by outcome",
      unit: "{poll}",
      valueType: INT,
      advice: { explicitBucketBoundaries: COUNT_BUCKETS },
    }),
    acquireContended: meter.createCounter(METRIC.acquireContended, {
      description:
        "Acquisitions that had to wait: found the lock held, were handed it by a release, or made more than one attempt or a poll",
      unit: "{acquisition}",
      valueType: INT,
    }),
    holdDuration: meter.createHistogram(METRIC.holdDuration, {
      description: "Time from a grant to its release or loss",
      unit: "s",
      advice: { explicitBucketBoundaries: HOLD_BUCKETS },
    }),
    held: meter.createUpDownCounter(METRIC.held, {
      description: "Locks granted and not yet released or lost",
      unit: "{lock}",
      valueType: INT,
    }),
    lost: meter.createCounter(METRIC.lost, {
      description: "Locks whose signal aborted because they could no longer be trusted, by reason",
      unit: "{lock}",
      valueType: INT,
    }),
    requests: meter.createCounter(METRIC.requests, {
      description: "Requests sent to each node, by operation and by the node's outcome",
      unit: "{request}",
      valueType: INT,
    }),
  };
}

/** Count the requests of one operation's nodes, each under its node and outcome. */
export function countRequests(
  instruments: Instruments,
  operation: CountedOperation,
  nodes: readonly NodeOutcome[],
  base: Attributes,
): void {
  for (const n of nodes) {
    if (n.requests === 0) continue;
    instruments.requests.add(n.requests, {
      ...base,
      [ATTRIBUTE.operation]: operation,
      [ATTRIBUTE.node]: n.node,
      [ATTRIBUTE.nodeOutcome]: n.outcome,
    });
  }
}

/** A node's answer as span-event attributes: never its error (its text may carry a Redis error). */
export function nodeAttributes(n: NodeOutcome): Attributes {
  const attributes: Attributes = {
    [ATTRIBUTE.node]: n.node,
    [ATTRIBUTE.nodeOutcome]: n.outcome,
    [ATTRIBUTE.requests]: n.requests,
  };
  if (n.latencyMs !== undefined) attributes[ATTRIBUTE.latencyMs] = n.latencyMs;
  if (n.status !== undefined) attributes[ATTRIBUTE.httpStatus] = n.status;
  return attributes;
}
