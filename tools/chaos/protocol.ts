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
  readonly resources: readonly string[];
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
}

/** An operation of a driven (scripted) client. */
export type DrivenOp =
  | { readonly op: "acquire"; readonly resource: string; readonly ttlMs: number; readonly once?: boolean }
  | { readonly op: "extend"; readonly ttlMs: number }
  | { readonly op: "read" }
  /** `pauseAfterCheck`: SIGSTOP itself right after checking the lock, before writing (S1). */
  | { readonly op: "write"; readonly pauseAfterCheck?: boolean }
  | { readonly op: "release" };

/** Harness → client. */
export type ToClient =
  | { readonly type: "init"; readonly config: ClientConfig }
  | { readonly type: "ping"; readonly id: number }
  | { readonly type: "run"; readonly untilMs: number }
  | { readonly type: "do"; readonly id: number; readonly op: DrivenOp }
  | { readonly type: "stall"; readonly ms: number }
  | { readonly type: "stop" };

/** Client → harness. */
export type FromClient =
  | { readonly type: "ready" }
  | { readonly type: "pong"; readonly id: number; readonly t: number }
  | { readonly type: "event"; readonly event: HistoryEvent }
  | { readonly type: "holding"; readonly worker: string; readonly resource: string | null }
  | { readonly type: "done"; readonly id: number; readonly ok: boolean; readonly detail?: string }
  | { readonly type: "stopped" };
