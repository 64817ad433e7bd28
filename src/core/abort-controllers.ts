/**
 * Recycled AbortControllers for fan-outs.
 *
 * Why: on Node 20 `new AbortController()` builds an EventTarget and then swaps its prototype,
 * which is slow and leaves garbage; with two per acquire + release it was the largest single
 * item of the client's CPU on instant nodes (`npm run bench -- --parts cpu`). A fan-out only
 * aborts its controller at its deadline or when the caller aborts; when every task finished
 * without that, nothing was ever signalled and the next fan-out can use the same controller.
 *
 * What a reused signal can carry: listeners that a node's request left behind (undici's `fetch`
 * removes its listener only when the request is garbage-collected, and raises the signal's
 * listener limit itself). A controller is therefore retired after {@link MAX_USES} fan-outs, so
 * such leftovers stay bounded, and the pool holds at most {@link POOL_SIZE} idle controllers.
 * `RedisNode.command` documents that a node must stop using the signal once its promise settles.
 *
 * Only where a signal is a plain object: Node, Deno and Bun. On Cloudflare Workers an AbortSignal
 * belongs to the request that created it (workerd keeps its canceler in the request's I/O
 * context), so a fetch of another request given it fails ("Cannot perform I/O on behalf of a
 * different request"); Vercel's Edge runtime and unknown runtimes are treated the same way. There
 * every fan-out makes its own controller, as a native one costs little.
 * @module
 */

/** Fan-outs one controller serves before it is dropped. */
const MAX_USES = 64;
/** Idle controllers kept; concurrent fan-outs beyond this create their own. */
const POOL_SIZE = 8;

/** A controller lent to one fan-out at a time. */
export interface PooledController {
  readonly controller: AbortController;
  uses: number;
}

const idle: PooledController[] = [];

/**
 * Whether this runtime's signals may serve fan-outs of different requests: Node (`Node.js/…`, or
 * no `navigator` at all before Node 21), Deno and Bun, by `navigator.userAgent`. Not Cloudflare
 * Workers (`Cloudflare-Workers`) nor Vercel's Edge runtime (a global `EdgeRuntime`).
 */
export function signalsOutliveRequests(
  scope: { navigator?: { userAgent?: unknown }; EdgeRuntime?: unknown } = globalThis,
): boolean {
  if (scope.EdgeRuntime !== undefined) return false;
  if (scope.navigator === undefined) return true;
  const agent = scope.navigator.userAgent;
  return typeof agent === "string" && /^(Node\.js|Deno|Bun)\//.test(agent);
}

const recycle = signalsOutliveRequests();

/** A controller whose signal has never aborted and has no fan-out using it. */
export function borrowController(): PooledController {
  const pooled = (recycle ? idle.pop() : undefined) ?? { controller: new AbortController(), uses: 0 };
  pooled.uses++;
  return pooled;
}

/**
 * Give a controller back once every task that saw its signal has finished. An aborted one is
 * dropped: its signal stays aborted.
 */
export function returnController(pooled: PooledController): void {
  if (!recycle || pooled.controller.signal.aborted || pooled.uses >= MAX_USES || idle.length >= POOL_SIZE) return;
  idle.push(pooled);
}
