/**
 * The time source. Lock deadlines live on a monotonic clock so wall-clock jumps cannot stretch
 * them; tests inject a fake one.
 * @module
 */

/** A monotonic millisecond clock. */
export interface Clock {
  /** Milliseconds since an arbitrary origin; never decreases. */
  now(): number;
}

/** `performance.now()`: monotonic on Node, Deno, Bun and Vercel Edge. On Cloudflare Workers it only advances at I/O (see the README). */
export const monotonicClock: Clock = Object.freeze({ now: () => performance.now() });
