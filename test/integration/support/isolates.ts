/**
 * Clients as separate isolates see each other, and requests held back on their way.
 *
 * Clients of one isolate share what the library keeps per cluster (offers of waiters, who holds
 * what): two clients whose nodes reach the same servers by the same means are one isolate. A
 * client whose every node carries a `fetch` of its own shares nothing with any other client: it
 * stands for a request in another isolate, a check independent of the client under test.
 */
import { expect } from "vitest";
import { type Lock, Redlock, type RedlockConfig, type RedlockOptions } from "../../../src/index.js";
import { auditClaim, type Endpoint } from "./claims.js";

/** Options of a test client: any option, and the cluster's name where its URLs differ from other clients'. */
export type ClientOptions = RedlockOptions & Pick<RedlockConfig, "clusterName">;

/** A client of its own isolate: every node gets a `fetch` function no other client has. */
export function foreignClient(endpoints: readonly Endpoint[], options: ClientOptions = {}): Redlock {
  const nodes = endpoints.map((e) => ({ ...e, fetch: ((input, init) => fetch(input, init)) as typeof fetch }));
  return new Redlock({ nodes, ...options });
}

/**
 * Assert that `lock` is what it claims, on the nodes themselves: its claimed deadline is backed by
 * the keys' PTTLs on a quorum (see `auditClaim`), and a client of another isolate cannot take
 * the resources while it claims validity.
 */
export async function expectHeldAlone(
  endpoints: readonly Endpoint[],
  lock: Lock,
  options: ClientOptions = {},
): Promise<void> {
  expect(lock.remainingMs(), "the lock claims validity").toBeGreaterThan(0);
  const audit = await auditClaim(endpoints, lock);
  expect(audit.violation, "claim vs the nodes' PTTLs on a quorum").toBeUndefined();
  const other = await foreignClient(endpoints, options).tryAcquire(lock.resources, 1000);
  if (other) await other.release();
  expect(other === null, "a client of another isolate took the lock while it claimed validity").toBe(true);
}

/** Which requests to hold back, on which side of the node, and for how long. */
export interface HoldBack {
  /** Whether a request (its command as sent, and the node's index) is to be held back. */
  readonly match: (args: readonly unknown[], node: number) => boolean;
  /** `request`: before it is sent (it lands late); `response`: after its answer came (it is read late). */
  readonly phase: "request" | "response";
  readonly ms: number;
}

/**
 * One `fetch` for every node of a client (so that clients built with it are one isolate), which
 * can hold back the next matching request of each node, once per node per {@link arm}.
 */
export function holdingFetch(endpoints: readonly Endpoint[]): {
  fetch: typeof fetch;
  /**
   * Hold back the next request of each node that matches. `done` resolves once every node has had
   * one held back and answered, or after 3 s (a node that got none).
   */
  arm(rule: HoldBack): { done: Promise<void>; held(): number };
  /** Requests in flight through this fetch. */
  inFlight(): number;
} {
  const urls = endpoints.map((e) => new URL(e.url).href);
  let armed: { rule: HoldBack; left: Set<number>; finished: () => void; held: number } | undefined;
  let inFlight = 0;
  const wrapped = (async (input, init) => {
    const node = urls.indexOf(new URL(String(input instanceof Request ? input.url : input)).href);
    const args = JSON.parse(String(init?.body ?? "[]")) as unknown[];
    const arming = armed;
    const hold = arming?.left.has(node) && arming.rule.match(args, node) ? arming : undefined;
    if (hold) {
      hold.left.delete(node);
      hold.held++;
    }
    inFlight++;
    try {
      if (hold?.rule.phase === "request") await sleep(hold.rule.ms);
      const response = await fetch(input, init);
      if (hold?.rule.phase === "response") {
        // Read the body now, so that the delay is only the client's reading of it.
        const text = await response.text();
        await sleep(hold.rule.ms);
        return new Response(text, { status: response.status, headers: response.headers });
      }
      return response;
    } finally {
      inFlight--;
      if (hold && hold.left.size === 0) hold.finished();
    }
  }) as typeof fetch;
  return {
    fetch: wrapped,
    arm(rule) {
      let finished = () => {};
      const done = new Promise<void>((resolve) => (finished = resolve));
      const state = { rule, left: new Set(urls.map((_, i) => i)), finished, held: 0 };
      armed = state;
      return { done: Promise.race([done, sleep(3000)]), held: () => state.held };
    },
    inFlight: () => inFlight,
  };
}

/** Whether a command carries `value` as one of its arguments. */
export function carries(args: readonly unknown[], value: string | number): boolean {
  return args.includes(value);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
