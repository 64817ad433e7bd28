/**
 * Acquiring a read or a write lock: attempts on every node decided by the quorum and the validity
 * left, exactly as a mutex's (`core/operations/acquire.ts`), with the read-write scripts instead of
 * `SET NX`, and waiting by backoff in between (as `core/backoff-waiting.ts` does).
 *
 * Safety: a reader is added on a node only where no writer holds the lock, and a writer only where
 * neither a writer nor a live reader does, each in one script. A read and a write lock granted at
 * once would need two quorums, which share a node that admitted both: impossible. Two writers:
 * likewise. Reader entries expire by the node's own clock, as the write key does, so validity and
 * drift are those of a mutex.
 *
 * Writers do not starve: a write attempt refused on a node leaves the writer's waiting mark there
 * (for `retryMaxDelayMs + 2 × requestTimeoutMs`, renewed by each attempt), and a node with a mark
 * admits no new reader. The readers already in keep their leases; once they are gone, the writer's
 * next attempt gets in. A grant, the write lock's release, and a writer that gives up clear its
 * own mark.
 *
 * Fencing: on a client with the `fencing` option, a write attempt is the fenced one of
 * `edge-redlock/fencing` (two phases, as a mutex's), which the option's value carries; a read
 * attempt is the plain one, and a read lock carries no fence (see docs/fencing.md).
 * @module
 */
import { InvalidArgumentError } from "../base/errors.js";
import type { AttemptReport } from "../base/report.js";
import { acquireWithBackoff } from "../core/backoff-waiting.js";
import type { Engine } from "../core/engine.js";
import { Lock, type LockOperations } from "../core/lock.js";
import { settledReport } from "../core/operations/acquire.js";
import { cleanUpAcquisition, type NodeRelease } from "../core/operations/cleanup.js";
import type { AcquireRequest, ResolvedOptions } from "../core/options.js";
import { randomToken } from "../core/token.js";
import { readOnNode, rwReleaseOnNode, type WriterMark, writeOnNode } from "./node-operations.js";

/** How long a waiting writer's mark stops new readers: until its next attempt, with room to spare. */
export function markTtlMs(o: ResolvedOptions): number {
  return o.retryMaxDelayMs + 2 * o.requestTimeoutMs;
}

/**
 * Attempts until one is granted, or the attempts, the acquire deadline or the signal run out.
 * `writer`: the waiting writer of a write lock (its mark's TTL is 0 for a single attempt), none
 * for a read lock. `operations`: those of the lock it hands out.
 */
export async function acquireReadWrite(
  engine: Engine,
  request: AcquireRequest,
  maxAttempts: number,
  signal: AbortSignal | undefined,
  operations: LockOperations,
  writer: WriterMark | undefined,
): Promise<Lock> {
  try {
    return await acquireWithBackoff(engine, request, maxAttempts, signal, (attempt) =>
      attemptReadWrite(engine, request, attempt, signal, operations, writer),
    );
  } catch (error) {
    if (writer !== undefined && writer.ttlMs > 0) clearMark(engine, request, writer.id);
    throw error;
  }
}

/** One attempt on every node. Never throws for node failures: the report says what happened. */
async function attemptReadWrite(
  engine: Engine,
  request: AcquireRequest,
  attempt: number,
  signal: AbortSignal | undefined,
  operations: LockOperations,
  writer: WriterMark | undefined,
): Promise<{ lock?: Lock; report: AttemptReport }> {
  const fenced = writer === undefined ? undefined : fencedWritesOf(request.options);
  if (fenced !== undefined && writer !== undefined) {
    return fenced.attemptWrite(engine, request, attempt, signal, operations, writer, rwReleaseOnNode);
  }
  const { resources, keys, ttlMs, options } = request;
  // A fresh token per attempt: the cleanup of a failed attempt never touches a later one's entries.
  const token = randomToken();
  const vote = await engine.vote(options, "acquire", resources, attempt, ttlMs, {
    yes: "acquired",
    signal,
    meter: request.meter,
    task: (i, context) =>
      writer === undefined
        ? readOnNode(engine.node(i), keys, token, ttlMs, context)
        : writeOnNode(engine.node(i), keys, token, ttlMs, writer, context),
  });
  const report = await settledReport(vote, options.quorum);
  if (report.ok) {
    const { startedAt, deadline, fan: acquireFan } = vote;
    return { lock: new Lock({ ...request, token, startedAt, deadline, report, operations, acquireFan }), report };
  }
  // The attempt's reader entries or write keys go; the writer's mark stays (it is still waiting).
  cleanUpAcquisition(engine, request, token, vote.fan, undefined, undefined, rwReleaseOnNode);
  return { report };
}

/**
 * What the `fencing` value of `edge-redlock/fencing` offers a write lock: its fenced attempt
 * (`fence-rw-write`, then the mutex's ratchet, quarantine and repair; see `fencing/acquire.ts`).
 * Found on the option's value, so the primitives never import the fencing module, as the core
 * finds the mutex's fenced attempt there.
 */
export interface FencedWrites {
  attemptWrite(
    engine: Engine,
    request: AcquireRequest,
    attempt: number,
    signal: AbortSignal | undefined,
    operations: LockOperations,
    writer: WriterMark,
    release: NodeRelease,
  ): Promise<{ lock?: Lock | undefined; report: AttemptReport }>;
}

/**
 * The options' fenced write attempt, when they ask for fencing.
 * @throws {InvalidArgumentError} when their fencing value has none (not `edge-redlock/fencing`'s).
 */
export function fencedWritesOf(o: ResolvedOptions): FencedWrites | undefined {
  if (o.fencing === false) return undefined;
  const fenced = o.fencing as Partial<FencedWrites>;
  if (typeof fenced.attemptWrite !== "function") {
    throw new InvalidArgumentError("this fencing value cannot fence a write lock: use fencing of edge-redlock/fencing");
  }
  return fenced as FencedWrites;
}

/** A writer gave up: clear its waiting mark where it is still the node's, in the background. */
function clearMark(engine: Engine, request: AcquireRequest, writer: string): void {
  const o = request.options;
  const fan = engine.fan(o, "release", request.resources, {
    yes: "released",
    task: (i, context) => rwReleaseOnNode(engine.node(i), request.keys, "", context, writer),
  });
  engine.background.track(fan.outcomes, o.requestTimeoutMs + 1000);
}
