/**
 * The history of a run: one JSON object per line, every event stamped on the harness clock
 * (see `clock.ts`). Clients, the nemesis, the nodes' MONITOR audit and the harness itself write to
 * the same stream, as in Jepsen's histories. Lock tokens never appear: events carry `lock`, a short
 * hash of the token, which identifies a grant without revealing it.
 * @module
 */
import { createHash } from "node:crypto";

/** Jepsen's event types: `invoke` starts an operation, `ok`/`fail` end it, `info` is anything else. */
export type EventType = "invoke" | "ok" | "fail" | "info";

/** One node's answer to the post-operation audit (GET + PTTL straight to its redis-server). */
export interface AuditedNode {
  /** Node index. */
  readonly i: number;
  /** Harness time the audit request was sent and its answer read. */
  readonly sentAt: number;
  readonly receivedAt: number;
  /** Whether the key held this grant's token; `null` when the node did not answer. */
  readonly holds: boolean | null;
  /** PTTL in ms when `holds` is true. */
  readonly pttl?: number;
}

/** A fault as the nemesis applied it. */
export interface FaultSpec {
  /** Unique within the run. */
  readonly id: number;
  readonly kind: FaultKind;
  readonly nodes?: readonly number[];
  readonly clients?: readonly string[];
  readonly params?: Readonly<Record<string, number | string | boolean>>;
}

/** Every fault the nemesis can inject. */
export type FaultKind =
  | "latency"
  | "hang"
  | "drop"
  | "http-5xx"
  | "garbage"
  | "partition"
  | "restart-now"
  | "restart-delayed"
  | "pause-node"
  | "clock-jump"
  | "pause-client"
  | "stall-client"
  | "kill-client"
  | "failover";

/** Fields every event has. */
interface Base {
  /** Harness clock, ms. */
  readonly t: number;
  /** "c0", "c1", … for clients ("c0.1" for the second worker of process c0); "nemesis"; "harness"; "node0", … for MONITOR lines. */
  readonly process: string;
  readonly type: EventType;
}

/** Lock operations of a client. */
export interface LockEvent extends Base {
  readonly f: "acquire" | "extend" | "release";
  /** The resource; of a lock of several, the first (sorted), under which its events are filed. */
  readonly resource: string;
  /** Every resource of a lock of several (absent for one): the grant is a claim on each. */
  readonly resources?: readonly string[];
  /** Hash of the lock token (see {@link tokenId}); absent on an acquire invoke. */
  readonly lock?: string;
  /** Requested TTL (invoke). */
  readonly ttl?: number;
  /** Harness time until which the lock claims to be held: `t + lock.remainingMs()` (ok). */
  readonly claimedDeadline?: number;
  /** Error code (fail). */
  readonly error?: string;
  /**
   * A failed acquire: how many fan-outs it made and the last one's outcome per node; an acquire
   * invoke: "using" for `redlock.using()`. A release:
   * "again" for a later call of `release()` on the same Lock. An extension: "in flight" for one the
   * holder did not wait for before it released.
   */
  readonly detail?: string;
  /** Acquire/extend round trip as the client measured it (ok/fail). */
  readonly latencyMs?: number;
  /** Release: nodes that released. */
  readonly released?: number;
  /** A grant of a semaphore's permit or a read-write lock's side (absent for a mutex). */
  readonly mode?: "permit" | "read" | "write";
  /** A semaphore's permits (with `mode` "permit"). */
  readonly permits?: number;
}

/** The audit right after a grant, an extension, or a failed extension while the lock still claims validity (checker 2). */
export interface AuditEvent extends Base {
  readonly f: "audit";
  readonly resource: string;
  readonly lock: string;
  readonly after: "acquire" | "extend" | "extend-failed";
  readonly claimedDeadline: number;
  readonly nodes: readonly AuditedNode[];
}

/** The lock's signal aborted for another reason than release: the client stops trusting it. */
export interface LostEvent extends Base {
  readonly f: "lost";
  readonly resource: string;
  readonly lock: string;
}

/** A read or write of a protected counter (checker 4). */
export interface CounterEvent extends Base {
  readonly f: "read" | "write";
  readonly resource: string;
  readonly lock: string;
  /** "unfenced": plain GET/SET; "fenced": the store checks the fencing token atomically. */
  readonly variant: "unfenced" | "fenced";
  /** Value read (read ok), or the value the write was based on (write). */
  readonly read?: number;
  /** Value written (write). */
  readonly value?: number;
  /** Value the write replaced (write ok): a lost update when it differs from `read`. */
  readonly prev?: number;
  /** Fenced store: whether the token was accepted. */
  readonly accepted?: boolean;
  readonly error?: string;
}

/** Nemesis events. */
export interface FaultEvent extends Base {
  readonly f: "fault-start" | "fault-end";
  readonly fault: FaultSpec;
}

/** One MONITOR line of a node, restricted to lock keys and scripts (checker 3). */
export interface MonitorEvent extends Base {
  readonly f: "monitor";
  /** Node index. */
  readonly node: number;
  /** Order of the line in the node's MONITOR stream (the execution order). */
  readonly seq: number;
  /** Where the command came from: "client" or "lua" (inside the preceding script). */
  readonly source: "client" | "lua";
  /** Command name, upper case. */
  readonly cmd: string;
  /** Script name for EVAL/EVALSHA ("extend", "release", or "other"). */
  readonly script?: string;
  /** The key, if the command has one. */
  readonly key?: string;
  /** Hash of the token argument or value (SET value, script ARGV[1]). */
  readonly value?: string;
  /** PX / PEXPIRE milliseconds. */
  readonly ms?: number;
  /** SET with NX. */
  readonly nx?: boolean;
}

/** The node's MONITOR stream restarted: the node came back empty, or the audit lost lines. */
export interface MonitorResetEvent extends Base {
  readonly f: "monitor-reset";
  readonly node: number;
  readonly seq: number;
  /** "empty": the node restarted without state; "gap": the audit may have missed lines. */
  readonly reason: "empty" | "gap";
}

/** Harness bookkeeping: run start and end, clock offsets, fencing availability, end-of-run scan. */
export interface InfoEvent extends Base {
  readonly f: "run-start" | "run-end" | "clock-offset" | "fencing" | "leftover-keys" | "note";
  readonly data?: Readonly<Record<string, unknown>>;
}

/** Any event of the history. */
export type HistoryEvent =
  | LockEvent
  | AuditEvent
  | LostEvent
  | CounterEvent
  | FaultEvent
  | MonitorEvent
  | MonitorResetEvent
  | InfoEvent;

/** The short public identifier of a lock token: 12 hex characters of its SHA-256. */
export function tokenId(token: string): string {
  return createHash("sha256").update(token).digest("hex").slice(0, 12);
}

const TYPES = new Set<EventType>(["invoke", "ok", "fail", "info"]);
const FUNCTIONS = new Set([
  "acquire",
  "extend",
  "release",
  "audit",
  "lost",
  "read",
  "write",
  "fault-start",
  "fault-end",
  "monitor",
  "monitor-reset",
  "run-start",
  "run-end",
  "clock-offset",
  "fencing",
  "leftover-keys",
  "note",
]);

/**
 * Checks an object has the shape of a history event (the fields every checker relies on).
 * @throws {TypeError} naming the first problem.
 */
export function validateEvent(value: unknown): HistoryEvent {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new TypeError("event is not an object");
  const e = value as Record<string, unknown>;
  if (typeof e.t !== "number" || !Number.isFinite(e.t)) throw new TypeError("event.t must be a finite number");
  if (typeof e.process !== "string" || e.process.length === 0) throw new TypeError("event.process must be a string");
  if (!TYPES.has(e.type as EventType)) throw new TypeError(`event.type is not one of ${[...TYPES].join("|")}`);
  if (!FUNCTIONS.has(e.f as string)) throw new TypeError(`unknown event.f ${JSON.stringify(e.f)}`);
  const needsResource = ["acquire", "extend", "release", "audit", "lost", "read", "write"];
  if (needsResource.includes(e.f as string) && typeof e.resource !== "string") {
    throw new TypeError(`${String(e.f)} event needs a resource`);
  }
  if ((e.f === "acquire" || e.f === "extend") && e.type === "ok" && typeof e.claimedDeadline !== "number") {
    throw new TypeError(`${e.f} ok needs a claimedDeadline`);
  }
  if (e.type !== "invoke" && ["acquire", "extend", "release", "audit", "lost"].includes(e.f as string)) {
    if (typeof e.lock !== "string" && !(e.f === "acquire" && e.type === "fail")) {
      throw new TypeError(`${String(e.f)} ${String(e.type)} needs a lock id`);
    }
  }
  if (e.f === "audit" && !Array.isArray(e.nodes)) throw new TypeError("audit needs nodes");
  if ((e.f === "fault-start" || e.f === "fault-end") && typeof (e.fault as FaultSpec | undefined)?.kind !== "string") {
    throw new TypeError("fault event needs a fault");
  }
  if (e.f === "monitor" && (typeof e.node !== "number" || typeof e.seq !== "number" || typeof e.cmd !== "string")) {
    throw new TypeError("monitor event needs node, seq and cmd");
  }
  return value as HistoryEvent;
}

/** Serialises events as JSON lines. */
export function toJsonLines(events: readonly HistoryEvent[]): string {
  return events.map((e) => JSON.stringify(e)).join("\n") + (events.length > 0 ? "\n" : "");
}

/**
 * Parses JSON lines into validated events (blank lines skipped).
 * @throws {TypeError} with the line number of the first bad line.
 */
export function parseJsonLines(text: string): HistoryEvent[] {
  const events: HistoryEvent[] = [];
  text.split("\n").forEach((line, index) => {
    if (line.trim() === "") return;
    try {
      events.push(validateEvent(JSON.parse(line)));
    } catch (error) {
      throw new TypeError(`history line ${index + 1}: ${(error as Error).message}`);
    }
  });
  return events;
}

/** Events sorted by harness time, stable (so one process's events keep their order). */
export function byTime(events: readonly HistoryEvent[]): HistoryEvent[] {
  return events
    .map((e, i) => ({ e, i }))
    .sort((a, b) => a.e.t - b.e.t || a.i - b.i)
    .map(({ e }) => e);
}
