/**
 * Helpers of a client process of the chaos harness (see `client.ts`): the counter scripts, the
 * broken clock of a negative control, and small utilities. No lock token ever leaves through them.
 * @module
 */
import type { AttemptReport, Lock } from "../../src/index.js";
import type { HistoryEvent } from "./history.js";

/** A history event before the worker stamps its id on it. */
export type Unstamped = HistoryEvent extends infer E ? (E extends HistoryEvent ? Omit<E, "process"> : never) : never;

/** Unfenced write: set the counter, return what it replaced. */
export const WRITE_UNFENCED = `local prev = redis.call("GET", KEYS[1])
redis.call("SET", KEYS[1], ARGV[1])
return tonumber(prev or "0")`;

/**
 * Fenced access (read when ARGV[2] is empty, else write ARGV[2]): refused unless the token is at
 * least the largest seen, which it then becomes, all in one atomic step.
 */
export const FENCED_ACCESS = `local max = tonumber(redis.call("GET", KEYS[2]) or "-1")
local token = tonumber(ARGV[1])
if token < max then return {0, 0} end
redis.call("SET", KEYS[2], ARGV[1])
local prev = tonumber(redis.call("GET", KEYS[1]) or "0")
if ARGV[2] ~= "" then redis.call("SET", KEYS[1], ARGV[2]) end
return {1, prev}`;

/** A clock that stands still while any request to a node is in flight (negative control). */
export function brokenClockFetch(): { clock: { now(): number }; fetch: typeof fetch } {
  let inFlight = 0;
  let since = 0;
  let lost = 0;
  const now = () => performance.now() - lost - (inFlight > 0 ? performance.now() - since : 0);
  const countingFetch: typeof fetch = async (input, init) => {
    if (inFlight++ === 0) since = performance.now();
    try {
      return await globalThis.fetch(input, init);
    } finally {
      if (--inFlight === 0) lost += performance.now() - since;
    }
  };
  return { clock: { now }, fetch: countingFetch };
}

/** The fencing token as a decimal string, when the library provides one. */
export function fenceOf(lock: Lock): string | undefined {
  const fence = (lock as { fence?: unknown }).fence;
  if (typeof fence === "number" || typeof fence === "bigint") return String(fence);
  if (typeof fence === "string" && /^\d+$/.test(fence)) return fence;
  return undefined;
}

/**
 * What a failed acquire tried, from the error's attempt reports: its fan-outs and the last one's
 * outcome per node (no tokens). Without it a history shows that waiters gave up, not whether they
 * gave up in line (one fan-out, then polls of the gate, which no report counts after the last
 * fan-out) or after falling back to fan-outs.
 */
export function attemptsOf(error: unknown): string | undefined {
  const attempts = (error as { attempts?: readonly AttemptReport[] } | null)?.attempts;
  const last = attempts?.at(-1);
  if (!attempts || !last) return undefined;
  return `${attempts.length} fan-outs; last: ${last.nodes.map((n) => n.outcome).join(" ")}`;
}

/** An error's `code`, or its class name: never its message, which could quote a reply. */
export function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : (error as Error)?.name || "Error";
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("audit timeout")), ms);
    }),
  ]);
}

/** Busy-waits: the event loop is starved, as under CPU contention. */
export function stall(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // spin
  }
}
