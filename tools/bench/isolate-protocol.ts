/** What the isolates parts and their client processes (./isolate-worker.ts) tell each other. */
import type { Placement } from "./isolate-latency.js";
import type { HostNode } from "./node-host-protocol.js";
import type { RestEndpoint } from "./raw.js";
import type { SystemSpec } from "./systems.js";

/** One client process: an isolate with its own client, its own fetch and its own latency. */
export interface IsolateConfig {
  spec: SystemSpec;
  /** The lock nodes, as the node host serves them (no delay there: this process adds its own). */
  nodes: HostNode[];
  data: RestEndpoint;
  placement: Placement;
  /** Callers in this process, sharing its one client, each looping on the hot key. */
  callers: number;
  key: string;
  counterKey: string;
  holdersKey: string;
  ttlMs: number;
}

/** One caller's figures. */
export interface CallerFigures {
  /** Critical sections released inside the window. */
  handoffs: number;
  /** The counter value each of its critical sections read (the section's place in the key's history). */
  sequence: number[];
  /** Milliseconds from wanting the lock to holding it (across give-ups), per handoff in the window. */
  waits: number[];
  /** When the window ended with this caller still wanting the lock: how long it had wanted it, ms. */
  openWait?: number;
}

/** One process's figures. */
export interface IsolateFigures {
  callers: CallerFigures[];
  /**
   * Requests each acquire() call sent to the lock nodes through this process's fetch (or its
   * ioredis connections), its release included: every call started inside the window, in order.
   */
  calls: number[];
  /** Calls still running when the process reported (their counts so far are in `calls`). */
  cut: number;
  /** Requests to the lock nodes sent inside the window, all of them. */
  windowRequests: number;
  /** Of those, requests no open acquire() or release() call sent (background work, or none). */
  outsideRequests: number;
  /** Critical sections completed (SET acknowledged), inside the window or while draining. */
  sections: number;
  /** Sections that found another holder inside (holders > 1). */
  overlaps: number;
  /** acquire() calls that gave up inside the window. */
  gaveUp: number;
  /** Give-ups inside the window by the reason the system named (see `LockClient.giveUps`). */
  gaveUpFor: Record<string, number>;
  errors: number;
  firstError?: string;
}

export type IsolateRequest =
  | { type: "prepare"; config: IsolateConfig }
  | { type: "go"; startAt: number; windowMs: number; drainMs: number };

export type IsolateReply =
  | { type: "ready" }
  | { type: "results"; figures: IsolateFigures }
  | { type: "failed"; error: string };
