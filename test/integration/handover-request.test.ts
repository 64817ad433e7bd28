/**
 * Two concurrent requests of one workerd isolate pass a lock from one to the other: the first
 * holds it, the second waits for it in the same isolate, and the first releases and ends (its
 * response sent, its I/O done) before the second has answered. The waiter must get the lock by
 * the hand-over (the release's own requests set its keys), and workerd must report no promise
 * resolved from another request's context: on Workers the I/O and promises of one request belong
 * to it, and a continuation left to a request that has ended never runs.
 *
 * Real workerd (Miniflare) and the real local nodes; workerd's own output is captured. Negative
 * controls: a client that shares nothing with the holder's (no hand-over is found), and a promise
 * resolved by a later request (the warning is found).
 */
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { bundleWorker } from "../../tools/demo/bundle.js";
import { raw, uniqueKey } from "./support/nodes.js";

const COMPATIBILITY_DATE = "2026-05-01";
/** What workerd prints when a request's promise is settled from another request's context. */
const CROSS_REQUEST = /different request|request context/i;

interface Answer<T> {
  readonly status: number;
  readonly body: T;
  /** When the response had arrived (performance.now() of this process). */
  readonly at: number;
}

interface Grant {
  readonly token: string;
  readonly report: { requests: number; votes: number; quorum: number; outcomes: string[] };
  /** Commands the isolate sent that carried the waiter's token. */
  readonly carriers: string[][];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("two requests of one isolate pass a lock from one to the other", () => {
  let mf: Miniflare;
  let base: string;
  /** Everything workerd printed, in order. */
  const output: string[] = [];

  beforeAll(async () => {
    mf = new Miniflare({
      modules: true,
      script: await bundleWorker(fileURLToPath(new URL("./support/handover-worker.ts", import.meta.url))),
      compatibilityDate: COMPATIBILITY_DATE,
      bindings: { NODES: JSON.stringify(inject("nodes").map(({ url, token }) => ({ url, token }))) },
      host: "127.0.0.1",
      port: 0,
      handleRuntimeStdio(stdout, stderr) {
        stdout.on("data", (chunk) => output.push(String(chunk)));
        stderr.on("data", (chunk) => output.push(String(chunk)));
      },
    });
    base = String(await mf.ready).replace(/\/$/, "");
  });
  afterAll(async () => {
    await mf?.dispose();
  });

  async function call<T>(query: Record<string, string>): Promise<Answer<T>> {
    // Far longer than an exchange needs (about a second), far shorter than forever.
    const response = await fetch(`${base}/?${new URLSearchParams(query)}`, { signal: AbortSignal.timeout(30_000) });
    return { status: response.status, body: (await response.json()) as T, at: performance.now() };
  }

  /** What workerd printed while `work` ran, and a moment after (its output is piped). */
  async function printedDuring<T>(work: () => Promise<T>): Promise<{ result: T; printed: string }> {
    const from = output.length;
    const result = await work();
    await sleep(500);
    return { result, printed: output.slice(from).join("") };
  }

  /**
   * A holds `resource` for `holdMs` of its 5 s TTL; B asks for it once A holds it on the nodes, and
   * waits; A releases (`release`: awaited, or handed to `waitUntil`) and answers; B holds the lock
   * 300 ms, so that A's request has ended well before B releases, and answers. `client`: as in
   * the worker.
   */
  async function passOn(client: string, release: string, holdMs = 600, ttlMs = 5000) {
    const resource = uniqueKey("handover");
    const nodes = inject("nodes");
    const common = { resource, ttlMs: String(ttlMs), client };
    const holding = call<{ token: string }>({ ...common, role: "hold", holdMs: String(holdMs), release });
    for (let i = 0; i < 500; i++) {
      if ((await raw(nodes[0] as (typeof nodes)[number], "EXISTS", resource)) === 1) break;
      await sleep(10);
    }
    const waiting = call<Grant>({ ...common, role: "wait", holdMs: "300" });
    const [holder, waiter] = await Promise.all([holding, waiting]);
    expect(holder.status, JSON.stringify(holder.body)).toBe(200);
    expect(waiter.status, JSON.stringify(waiter.body)).toBe(200);
    // Handed over: a request the isolate sent carried the holder's token and the waiter's (its own),
    // as a release that sets the next holder's keys does.
    const handedOver =
      waiter.body.token !== holder.body.token && waiter.body.carriers.some((args) => args.includes(holder.body.token));
    return { holder, waiter, handedOver };
  }

  for (const client of ["module", "request"])
    for (const release of ["await", "waitUntil"])
      it(`a ${client === "module" ? "module-level client" : "client made per request"}, the release ${release === "await" ? "awaited" : "handed to waitUntil"}: the waiter gets the lock by the hand-over after the holder's request ended, and workerd warns of nothing`, async () => {
        const { result, printed } = await printedDuring(() => passOn(client, release));
        const { holder, waiter, handedOver } = result;
        expect(holder.at).toBeLessThan(waiter.at);
        expect(waiter.body.token).not.toBe(holder.body.token);
        expect(waiter.body.report.votes).toBeGreaterThanOrEqual(waiter.body.report.quorum);
        expect(handedOver, JSON.stringify(waiter.body.report)).toBe(true);
        expect(printed).not.toMatch(CROSS_REQUEST);
      });

  it("a lock released with most of its TTL left: the waiter still gets it by a hand-over, with a token of its own", async () => {
    // 250 ms of a 5 s TTL: a release that passed the lock itself on would give the waiter the
    // holder's token.
    const { result, printed } = await printedDuring(() => passOn("module", "await", 250));
    expect(result.waiter.body.token).not.toBe(result.holder.body.token);
    expect(result.handedOver, JSON.stringify(result.waiter.body.report)).toBe(true);
    expect(printed).not.toMatch(CROSS_REQUEST);
  });

  it("a release left unawaited (no waitUntil), cancelled with the holder's request: the waiter still gets the lock, once the keys expire at the latest", async () => {
    // The holder's request ends as its release is sent, and workerd cancels the release's requests:
    // the keys stay for their TTL (2 s). The waiter may have offered to take the lock over from
    // that release; it must not wait on requests that will never answer, but get the lock once
    // the keys expire, well within its 10 s acquireTimeoutMs.
    const { result, printed } = await printedDuring(() => passOn("module", "unawaited", 300, 2000));
    expect(result.waiter.body.token).not.toBe(result.holder.body.token);
    expect(printed).not.toMatch(CROSS_REQUEST);
  });

  it("negative control: a waiter whose client shares nothing with the holder's gets the lock without a hand-over", async () => {
    const { waiter, handedOver } = await passOn("isolated", "await");
    expect(waiter.body.report.votes).toBeGreaterThanOrEqual(waiter.body.report.quorum);
    expect(handedOver).toBe(false);
  });

  it("negative control: a promise made by a request that has ended, resolved by the next one, is reported", async () => {
    const { printed } = await printedDuring(async () => {
      expect((await call({ role: "make-promise" })).status).toBe(200);
      expect((await call({ role: "resolve-promise" })).status).toBe(200);
    });
    expect(printed).toMatch(CROSS_REQUEST);
  });
});
