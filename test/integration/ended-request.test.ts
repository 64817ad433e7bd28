/**
 * Requests of one isolate share a Redlock client, and so its memory of hot keys: a release keeps a
 * place in the gate's line for the client's next acquisition of the key, to be resolved by the
 * gate's answer. On Workers, a request's remaining I/O and timers are cancelled once it has
 * answered and its `waitUntil` work is done. If the releasing request ends before the gate has
 * answered, the next request that takes the place must not wait for that answer forever (the demo
 * once had one request hang until its client's 300 s timeout), and a `using()` release handed to
 * `waitUntil` should keep its request alive until the nodes' answers are in.
 *
 * Real workerd (Miniflare) and the real local nodes; the gate's release answer is delayed inside
 * the worker by a timer of the releasing request.
 */
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { gateIndex } from "../../src/waiting/gate.js";
import { bundleWorker } from "../../tools/demo/bundle.js";
import { raw, uniqueKey } from "./support/nodes.js";

const COMPATIBILITY_DATE = "2026-05-01";

describe("a request that ends before the gate answers its release", () => {
  let mf: Miniflare;
  let base: string;

  beforeAll(async () => {
    mf = new Miniflare({
      modules: true,
      script: await bundleWorker(fileURLToPath(new URL("./support/ended-request-worker.ts", import.meta.url))),
      compatibilityDate: COMPATIBILITY_DATE,
      bindings: {
        NODES: JSON.stringify(inject("nodes").map(({ url, token }) => ({ url, token }))),
      },
      host: "127.0.0.1",
      port: 0,
    });
    base = String(await mf.ready).replace(/\/$/, "");
  });
  afterAll(async () => {
    await mf?.dispose();
  });

  it("holds up no later request of the isolate", async () => {
    const resource = uniqueKey("ended");
    // Each request hands lock.release() to waitUntil, which ends at the release's quorum; the
    // gate's release would go out 500 ms later, on a timer that is cancelled with the request. The
    // place that release asked for never gets an answer, and the gate keeps the key for its TTL.
    const hold = (holdMs: number) =>
      fetch(
        `${base}/?resource=${encodeURIComponent(resource)}&holdMs=${holdMs}&ttlMs=2000&gateReleaseDelayMs=500&release=plain`,
        {
          // Far longer than the whole exchange needs (a few seconds), far shorter than forever.
          signal: AbortSignal.timeout(20_000),
        },
      );
    // A holds; B comes while A holds, and waits in line (the key is now hot for the client).
    const a = hold(600);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const b = hold(600);
    expect((await a).status).toBe(200);
    // A has answered; its release keeps a place for the client's next acquisition, to be resolved
    // by the gate's answer, which does not come. C comes while B acquires or holds, so it goes
    // straight for that place.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const c = hold(0);
    expect((await b).status).toBe(200);
    expect((await c).status).toBe(200);
  });

  it("settled() in a later request ends, though the work of an ended request never settles", async () => {
    const resource = uniqueKey("settled");
    // The release answers at its quorum and its request ends; the gate's release (500 ms late, past
    // the 200 ms deadline) stays tracked as background work, and its deadline's timer is cancelled
    // with the request.
    const released = await fetch(
      `${base}/?resource=${encodeURIComponent(resource)}&ttlMs=2000&gateReleaseDelayMs=500&release=plain`,
      { signal: AbortSignal.timeout(20_000) },
    );
    expect(released.status).toBe(200);
    // The release has its quorum within a few ms of the answer.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const settled = await fetch(`${base}/?settled=1`, { signal: AbortSignal.timeout(20_000) });
    expect(settled.status).toBe(200);
    expect(((await settled.json()) as { abandoned: number }).abandoned).toBeGreaterThanOrEqual(1);
  });

  it("a release handed to waitUntil by using() reaches a slow gate: the request lives until it has", async () => {
    const resource = uniqueKey("slow-gate");
    const nodes = inject("nodes");
    const gate = nodes[gateIndex([resource], nodes.length)] as (typeof nodes)[number];
    // The other nodes answer the release at once; the gate gets it 300 ms later, well within the
    // release's deadline (1 s for a 10 s TTL).
    const answer = await fetch(`${base}/?resource=${encodeURIComponent(resource)}&ttlMs=10000&gateReleaseDelayMs=300`, {
      signal: AbortSignal.timeout(20_000),
    });
    expect(answer.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // The gate's own key, read straight from the node: deleted by the release, not left to expire.
    expect(await raw(gate, "PTTL", resource)).toBe(-2);
    for (const node of nodes) expect(await raw(node, "EXISTS", resource)).toBe(0);
  });
});
