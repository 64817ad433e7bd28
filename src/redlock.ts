/**
 * The `Redlock` of `edge-redlock`: the core client (`core/redlock.ts`), waiting in line at the
 * resource's gate node (`waiting/`) instead of by backoff alone.
 * @module
 */
import { Redlock as CoreRedlock } from "./core/redlock.js";
import type { WaitingStrategy } from "./core/waiting.js";
import { waitInLine } from "./waiting/index.js";

/**
 * A Redlock client over N independent Redis nodes reached by `fetch`. A call that finds the lock
 * held waits in line at one node (the resource's gate): one request per poll, turns taken first
 * come first served, and a release in the same isolate hands the lock over to the next waiter
 * (see docs/waiting.md). `edge-redlock/core` has the same client with backoff alone.
 *
 * @example
 * ```ts
 * const redlock = new Redlock({ nodes: [{ url, token }, { url: url2, token: token2 }, { url: url3, token: token3 }] });
 * await redlock.using("invoice:42", 10_000, async (signal) => {
 *   await chargeCustomer({ signal });
 * });
 * ```
 * @see https://redis.io/docs/latest/develop/use/patterns/distributed-locks/
 */
export class Redlock extends CoreRedlock {
  /** @internal */
  static override readonly waiting: WaitingStrategy = waitInLine;
}
