/**
 * Messages between the harness and its client processes (Node IPC). Each client is its own OS
 * process so the nemesis can SIGSTOP it (a GC pause, a frozen isolate) or SIGKILL it.
 * @module
 */
import type { HistoryEvent } from "./history.js";

/** What a client process is told at start. Node tokens travel here, never on the command line. */
export interface ClientConfig {
  /** "c0", "c1", … (its workers, when several, are "c0.0", "c0.1", …). */
  readonly id: string;
  /** Concurrent lock workers in this process, each with its own Redlock client. @default 1 */
  readonly workers?: number;
  /** Lock nodes, as this client reaches them (through the fault proxy). */
  readonly nodes: readonly { readonly url: string; readonly token: string }[];
  /** redis-server port of every lock node, for the post-operation audit (direct, no proxy). */
  readonly redisPorts: readonly number[];
  /** Port of the separate "resource" redis-server holding the protected counters. */
  readonly resourcePort: number;
  readonly quorum: number;
  readonly ttlMs: number;
  /** Per-request deadline; default: the library's. */
  readonly requestTimeoutMs?: number;
  readonly maxAttempts: number;
  /** What the random workload locks: a resource, or several locked all-or-none. */
  readonly resources: readonly Target[];
  /**
   * The workers of a process take the targets in turn (from an offset per process) instead of at
   * random: every target is locked within a few rounds, and neighbours in the list at once.
   */
  readonly targetsInTurn?: boolean;
  /** Probability that a holder extends its lock once, with a TTL drawn from [ttl, 2 ttl] (never shortening it). */
  readonly extendProbability: number;
  /** Longest work under the lock between the read and the write of the counter, ms. */
  readonly workMs: number;
  /** Longest pause between two acquisitions, ms. */
  readonly thinkMs: number;
  readonly seed: number;
  /**
   * Negative control: a clock that stands still while a request to a node is in flight, so the
   * validity is not reduced by the round trip (a broken client).
   */
  readonly brokenClock: boolean;
  /** Exercise the fenced counter when the library hands out `lock.fence`. */
  readonly fenced: boolean;
  /** Acquire with `fencing: true` (the nodes are initialised for it by the harness). */
  readonly fencing?: boolean;
  /** The API misused as users misuse it (see {@link Misuse}); none by default. */
  readonly misuse?: Misuse;
  /**
   * Display ids of the lock nodes (`{ url, token, id }`), the same on both clusters when there is
   * a {@link ClientConfig.twin}: two clusters whose node configs carry equal ids.
   */
  readonly nodeIds?: readonly string[];
  /** A second cluster: the odd workers of the process lock on it instead (see {@link TwinCluster}). */
  readonly twin?: TwinCluster;
  /** The workload's targets name a semaphore or a read-write lock instead of mutex resources. */
  readonly primitive?: Primitive;
}

/**
 * A primitive the workload (or a driver) takes instead of a mutex, each target naming one. A
 * `broken` one is a negative control: the design of other libraries, or a bug, built on the
 * library's own client by rewriting what it sends (see `client-primitives.ts`).
 */
export type Primitive =
  | {
      readonly kind: "semaphore";
      readonly permits: number;
      /** A count of holders per node, admitted where below the limit on a quorum. */
      readonly broken?: "count-per-node";
    }
  | {
      readonly kind: "rw";
      /** Share of the workload's acquisitions that are writes. */
      readonly writeShare: number;
      /** A read lock that adds its reader whatever the write key says. */
      readonly broken?: "read-ignores-writer";
    };

/** A lock target: one resource, or several locked all-or-none. */
export type Target = string | readonly string[];

/**
 * A second, independent cluster in the same client process, reached by other redis-servers and
 * bridges but with the same resource names (and, through `nodeIds`, the same node ids). Its
 * resources are recorded in the history with `tag` in front, so that the checkers never mix the
 * two clusters' grants; its nodes are `nodeOffset`, `nodeOffset + 1`, … in the audits.
 */
export interface TwinCluster {
  readonly nodes: readonly { readonly url: string; readonly token: string }[];
  readonly redisPorts: readonly number[];
  readonly tag: string;
  readonly nodeOffset: number;
}

/** Probabilities of each misuse, per lock round of the random workload (0 or absent: never). */
export interface Misuse {
  /** `release()` called again on a released Lock: once or twice more, after it or at once with it. */
  readonly repeatRelease?: number;
  /** The round runs in `redlock.using()`, whose routine releases the lock itself (most of the time). */
  readonly releaseInUsing?: number;
  /**
   * The released lock's token goes to the harness, which hands it to another client instance (a
   * worker of any process but the releasing one), which calls `redlock.release(resources, token)` or
   * `redlock.extend(resources, token, ttl)` with it a moment later.
   */
  readonly staleToken?: number;
  /** An extension started and left in flight when the lock is released: shorter or longer than the TTL. */
  readonly extendInFlight?: number;
}

/** An operation of a driven (scripted) client, by its worker 0 unless `worker` says otherwise. */
export type DrivenOp =
  /** `mode`: of a read-write lock (see {@link Primitive}), which side. */
  (
    | {
        readonly op: "acquire";
        readonly resource: Target;
        readonly ttlMs: number;
        readonly once?: boolean;
        readonly mode?: "read" | "write";
      }
    /** `inFlight`: started and not waited for (a later release leaves it in flight); never audited. */
    | { readonly op: "extend"; readonly ttlMs: number; readonly inFlight?: boolean }
    | { readonly op: "read" }
    /** `pauseAfterCheck`: SIGSTOP itself right after checking the lock, before writing (S1). */
    | { readonly op: "write"; readonly pauseAfterCheck?: boolean }
    /**
     * `repeat`: `release()` called that many times more on the same Lock (`together`: all at once,
     * else one after another); `shareToken`: the token goes to the harness (see `ClientProcess.onToken`).
     */
    | { readonly op: "release"; readonly repeat?: number; readonly together?: boolean; readonly shareToken?: boolean }
    /** `redlock.release(resources, token)` or `redlock.extend(resources, token, ttlMs)` with a token not ours. */
    | { readonly op: "by-token"; readonly f: "release" | "extend"; readonly stale: StaleToken; readonly ttlMs?: number }
  ) & { readonly worker?: number };

/** A token a released lock gave up, passed on by the harness (it never enters the history). */
export interface StaleToken {
  readonly resources: readonly string[];
  readonly token: string;
  /** The worker that released it ("c0.1"). */
  readonly from: string;
  /** Its cluster's history tag ("" for the first cluster). */
  readonly tag: string;
}

/** Harness → client. */
export type ToClient =
  | { readonly type: "init"; readonly config: ClientConfig }
  | { readonly type: "ping"; readonly id: number }
  | { readonly type: "run"; readonly untilMs: number }
  | { readonly type: "do"; readonly id: number; readonly op: DrivenOp }
  /** A released token to misuse by token, from a worker other than `from` (see `Misuse.staleToken`). */
  | { readonly type: "stale"; readonly stale: StaleToken }
  | { readonly type: "stall"; readonly ms: number }
  | { readonly type: "stop" };

/** Client → harness. */
export type FromClient =
  | { readonly type: "ready" }
  | { readonly type: "pong"; readonly id: number; readonly t: number }
  | { readonly type: "event"; readonly event: HistoryEvent }
  | { readonly type: "holding"; readonly worker: string; readonly resource: string | null }
  | { readonly type: "done"; readonly id: number; readonly ok: boolean; readonly detail?: string }
  /** A worker released a lock and shares its token (see `Misuse.staleToken`, `shareToken`). */
  | { readonly type: "token"; readonly stale: StaleToken }
  | { readonly type: "stopped" };
