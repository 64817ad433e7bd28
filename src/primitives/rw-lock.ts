/**
 * A read-write lock across the quorum: many readers or one writer. Each node keeps, per lock, a
 * write key (the writer's token, `PX`), a sorted set of readers (token → expiry on the node's own
 * clock, read by `TIME`) and a waiting writer's mark; per-node scripts check both (see
 * `rw-attempts.ts` for why two quorums can never admit a writer beside anyone else).
 *
 * Cost, per acquisition: as a mutex, N requests (one script per node) and one round trip when the
 * lock is free; N per attempt while waiting, with backoff in between. Release, extend and verify:
 * N requests each, as a mutex's. A fenced write lock costs what a fenced mutex does: two round
 * trips and up to 2N requests.
 * @module
 */
import { LockHeldError } from "../base/errors.js";
import type { Engine } from "../core/engine.js";
import type { Lock, LockOperations } from "../core/lock.js";
import type { AcquireOptions, Redlock, UsingOptions } from "../core/redlock.js";
import { randomToken } from "../core/token.js";
import {
  type Call,
  lockOperations,
  prepareCall,
  primitiveKey,
  refuseNested,
  runUsing,
  validateClient,
  validateName,
} from "./calls.js";
import { rwExtendOnNode, rwReleaseOnNode, rwVerifyOnNode } from "./node-operations.js";
import { acquireReadWrite, fencedWritesOf, markTtlMs } from "./rw-attempts.js";

type Mode = "read" | "write";

/**
 * A read-write lock: `acquireRead` shares the lock with other readers, `acquireWrite` excludes
 * readers and writers. Each grant is a {@link Lock} of its own (its own token, extend, release,
 * signal, remainingMs), valid as a mutex is: a quorum, validity counted from before the first
 * send, less the drift allowance. A writer that waits stops new readers from joining, so writers do
 * not starve (readers may, under a steady stream of writers). On a client with the `fencing`
 * option of `edge-redlock/fencing`, every write lock carries `lock.fence`, from one sequence per
 * read-write lock (monotonic across its writers, apart from any mutex's), exactly as a fenced
 * mutex does; read locks carry none (`lock.fence` is `undefined`).
 *
 * @example
 * ```ts
 * const doc = new ReadWriteLock(redlock, "doc:42");
 * const text = await doc.usingRead(10_000, async (signal) => load(signal));
 * await doc.usingWrite(10_000, async (signal) => save(text, signal));
 * ```
 */
export class ReadWriteLock {
  /** The lock's name: its keys are `keyPrefix + "__edge-redlock__:rw:…"`. */
  readonly name: string;
  readonly #redlock: Redlock;
  readonly #engine: Engine;
  readonly #readOperations: LockOperations;

  /**
   * @param redlock the client whose nodes and options the locks use (`edge-redlock` or `edge-redlock/core`).
   * @param name a non-empty string of at most 1024 characters; any string (its keys are in the reserved namespace).
   * @throws {InvalidArgumentError} for a missing client or a bad name.
   */
  constructor(redlock: Redlock, name: string) {
    this.#redlock = validateClient(redlock, "new ReadWriteLock()");
    this.name = validateName(name, "a ReadWriteLock");
    this.#engine = this.#redlock.engine;
    this.#readOperations = lockOperations(this.#engine, () => undefined, {
      extend: rwExtendOnNode,
      release: rwReleaseOnNode,
      verify: rwVerifyOnNode,
    });
  }

  /**
   * Take a read lock, shared with other readers, waiting while a writer holds the lock or waits
   * for it. Options and errors as for `Redlock.acquire()`.
   */
  async acquireRead(ttlMs: number, options?: AcquireOptions): Promise<Lock> {
    const call = this.#call(ttlMs, options, "readWriteLock.acquireRead()", false, true);
    return await this.#acquire(call, "read", call.o.maxAttempts);
  }

  /**
   * Take a write lock, exclusive of readers and writers, waiting while either holds it (new
   * readers are stopped meanwhile). Options and errors as for `Redlock.acquire()`.
   */
  async acquireWrite(ttlMs: number, options?: AcquireOptions): Promise<Lock> {
    const call = this.#call(ttlMs, options, "readWriteLock.acquireWrite()", false, true);
    return this.#acquire(call, "write", call.o.maxAttempts);
  }

  /** One attempt at a read lock: `null` while a writer holds or waits for it; throws for node failures. */
  async tryAcquireRead(ttlMs: number, options?: AcquireOptions): Promise<Lock | null> {
    return orNull(this.#acquire(this.#call(ttlMs, options, "readWriteLock.tryAcquireRead()"), "read", 1));
  }

  /** One attempt at a write lock (it leaves no waiting mark): `null` while held; throws for node failures. */
  async tryAcquireWrite(ttlMs: number, options?: AcquireOptions): Promise<Lock | null> {
    return orNull(this.#acquire(this.#call(ttlMs, options, "readWriteLock.tryAcquireWrite()"), "write", 1));
  }

  /** Run `routine` under a read lock, as `Redlock.using()` runs one under a lock. */
  async usingRead<T>(
    ttlMs: number,
    routine: (signal: AbortSignal, lock: Lock) => Promise<T>,
    options?: UsingOptions,
  ): Promise<T> {
    const call = this.#call(ttlMs, options, "readWriteLock.usingRead()", true, true);
    return runUsing(
      this.#redlock,
      call,
      this.#held(call),
      await this.#acquire(call, "read", call.o.maxAttempts),
      routine,
    );
  }

  /** Run `routine` under a write lock, as `Redlock.using()` runs one under a lock. */
  async usingWrite<T>(
    ttlMs: number,
    routine: (signal: AbortSignal, lock: Lock) => Promise<T>,
    options?: UsingOptions,
  ): Promise<T> {
    const call = this.#call(ttlMs, options, "readWriteLock.usingWrite()", true, true);
    return runUsing(
      this.#redlock,
      call,
      this.#held(call),
      await this.#acquire(call, "write", call.o.maxAttempts),
      routine,
    );
  }

  /** This lock as a `using()` routine holds it, read or write (see `refuseNested`). */
  #held(call: Call): string {
    return primitiveKey(call.o.keyPrefix, "rw", this.name, "");
  }

  /** A call's input validated and resolved; `waits`: refused inside a routine that holds this lock. */
  #call(ttlMs: number, options: UsingOptions | undefined, where: string, using = false, waits = false): Call {
    const call = prepareCall(this.#engine, ttlMs, options, where, using);
    if (waits) refuseNested(this.#engine, this.#held(call), where);
    fencedWritesOf(call.o); // refuses a fencing value that cannot fence a write lock, before any send
    return call;
  }

  #acquire(call: Call, mode: Mode, maxAttempts: number): Promise<Lock> {
    const { o, signal, meter } = call;
    const part = (name: string) => primitiveKey(o.keyPrefix, "rw", this.name, name);
    const keys = [part("write"), part("readers"), part("writer-waiting")];
    const request = { resources: [this.name], keys, ttlMs: call.ttlMs, options: o, meter };
    // One writer id per call: every attempt renews the same mark, and the write lock's release clears it.
    const writer = mode === "write" ? { id: randomToken(), ttlMs: maxAttempts > 1 ? markTtlMs(o) : 0 } : undefined;
    const operations =
      writer === undefined
        ? this.#readOperations
        : lockOperations(this.#engine, () => undefined, {
            extend: rwExtendOnNode,
            release: (node, keys, token, context) => rwReleaseOnNode(node, keys, token, context, writer.id),
            verify: rwVerifyOnNode,
          });
    return this.#redlock.cluster.acquire(o, signal, meter, () =>
      acquireReadWrite(this.#engine, request, maxAttempts, signal, operations, writer),
    );
  }
}

async function orNull(acquiring: Promise<Lock>): Promise<Lock | null> {
  try {
    return await acquiring;
  } catch (error) {
    if (error instanceof LockHeldError) return null;
    throw error;
  }
}
