/**
 * `edge-redlock/otel` against real nodes, read back through the OpenTelemetry SDK in memory: the
 * documented metrics with exact counts, durations within what the test itself measured, one span
 * per operation with an event per node answer, and no secret, resource name or error text in
 * anything exported.
 */
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it } from "vitest";
import { Redlock as CoreRedlock } from "../../src/core/index.js";
import { Redlock, type RedlockConfig } from "../../src/index.js";
import { instrument } from "../../src/otel/index.js";
import { gateIndex } from "../../src/waiting/gate.js";
import {
  everything,
  histogram,
  type Point,
  pointsOf,
  spanMs,
  type TestTelemetry,
  testTelemetry,
  total,
} from "../support/otel.js";
import { raw, uniqueKey } from "./support/nodes.js";
import { useOwnCluster } from "./support/own-cluster.js";

const nodesOf = useOwnCluster();
const endpoints = () => nodesOf().nodes.map(({ url, token }) => ({ url, token }));
const named = () => endpoints().map((e, i) => ({ ...e, id: `node-${i + 1}` }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const NODE_IDS = ["node-1", "node-2", "node-3", "node-4", "node-5"];

let telemetry: TestTelemetry | undefined;
afterEach(async () => {
  await telemetry?.shutdown();
  telemetry = undefined;
});

/** An instrumented client with generous deadlines (this checks counts, not speed, on a busy machine). */
function client(extra: Partial<RedlockConfig> = {}): { redlock: Redlock; t: TestTelemetry } {
  const t = testTelemetry();
  telemetry = t;
  const redlock = instrument(new Redlock({ nodes: named(), requestTimeoutMs: 1000, ...extra }), {
    meter: t.meter,
    tracer: t.tracer,
    resourceAttribute: () => "otel-test",
  });
  return { redlock, t };
}

/**
 * Load the scripts on every node, so that each operation costs one request per node: a node's first
 * EVALSHA of a script finds it missing and sends it again with EVAL. The release tells the gate
 * node (a script of its own), so every node is made the gate of a key once.
 */
async function warmScripts(): Promise<void> {
  const warm = new Redlock({ nodes: named(), requestTimeoutMs: 1000 });
  const gates = new Set<number>();
  for (let n = 0; gates.size < 5; n++) {
    const key = uniqueKey(`otel-warm-${n}`);
    const gate = gateIndex([key], 5);
    if (gates.has(gate)) continue;
    gates.add(gate);
    const lock = await warm.acquire(key, 5000);
    await lock.extend(5000);
    await lock.verify();
    await lock.release();
  }
  await warm.settled();
}

const ms = (seconds: number) => seconds * 1000;
const named_ = (spans: readonly ReadableSpan[], name: string) => spans.filter((s) => s.name === name);
const eventsOf = (span: ReadableSpan, name: string) => span.events.filter((e) => e.name === name);

/** Requests counted per node for one operation, and their outcomes. */
function requestsByNode(points: readonly Point[], operation: string): Record<string, number> {
  const byNode: Record<string, number> = {};
  for (const p of pointsOf(points, "edge_redlock.node.requests", { "edge_redlock.operation": operation })) {
    const node = p.attributes["edge_redlock.node"] as string;
    byNode[node] = (byNode[node] ?? 0) + (p.value as number);
  }
  return byNode;
}

function expectNoSecrets(points: readonly Point[], spans: readonly ReadableSpan[], ...secrets: string[]): void {
  const text = everything(points, spans);
  for (const secret of [...secrets, ...endpoints().map((e) => e.token)]) expect(text).not.toContain(secret);
}

describe("edge-redlock/otel against real nodes", () => {
  it("an uncontended acquire, verify and release: one of each, exact counts, durations within the test's own", async () => {
    await warmScripts();
    const { redlock, t } = client();
    const key = uniqueKey("otel-plain");
    const started = performance.now();
    const lock = await redlock.acquire(key, 5000);
    const acquiredAfter = performance.now() - started;
    expect(total(await t.metrics(), "edge_redlock.lock.held")).toBe(1);
    await lock.verify();
    await lock.release();
    const releasedAfter = performance.now() - started;
    const points = await t.metrics();

    const waited = histogram(points, "edge_redlock.acquire.duration", { "edge_redlock.outcome": "acquired" });
    expect(waited.count).toBe(1);
    expect(waited.sum).toBeGreaterThan(0);
    expect(ms(waited.sum)).toBeLessThanOrEqual(acquiredAfter);
    expect(pointsOf(points, "edge_redlock.acquire.duration")[0]?.unit).toBe("s");
    expect(histogram(points, "edge_redlock.acquire.attempts")).toMatchObject({ count: 1, sum: 1 });
    expect(histogram(points, "edge_redlock.acquire.polls")).toMatchObject({ count: 1, sum: 0 });
    expect(total(points, "edge_redlock.acquire.contended")).toBe(0);
    expect(total(points, "edge_redlock.lock.held")).toBe(0);
    const held = histogram(points, "edge_redlock.lock.hold.duration", { "edge_redlock.hold.end": "released" });
    expect(held.count).toBe(1);
    expect(ms(held.sum)).toBeLessThanOrEqual(releasedAfter - ms(waited.sum));
    expect(total(points, "edge_redlock.lock.lost")).toBe(0);
    // One request per node and operation; a node still answering when the quorum was reached is `pending`.
    for (const operation of ["acquire", "verify", "release"]) {
      expect(requestsByNode(points, operation)).toEqual(Object.fromEntries(NODE_IDS.map((id) => [id, 1])));
    }
    const yes = { acquire: "acquired", verify: "verified", release: "released" } as const;
    for (const [operation, outcome] of Object.entries(yes)) {
      const said = total(points, "edge_redlock.node.requests", {
        "edge_redlock.operation": operation,
        "edge_redlock.node.outcome": outcome,
      });
      expect(said).toBeGreaterThanOrEqual(3);
      const pending = total(points, "edge_redlock.node.requests", {
        "edge_redlock.operation": operation,
        "edge_redlock.node.outcome": "pending",
      });
      expect(said + pending).toBe(5);
    }
    expect(total(points, "edge_redlock.node.requests", { "edge_redlock.operation": "poll" })).toBe(0);
    for (const p of points) expect(p.attributes["edge_redlock.resource"]).toBe("otel-test");

    const spans = t.spans();
    expect(spans.map((s) => s.name)).toEqual(["edge_redlock.acquire", "edge_redlock.verify", "edge_redlock.release"]);
    const [acquire, verify, release] = spans as [ReadableSpan, ReadableSpan, ReadableSpan];
    expect(acquire.attributes).toMatchObject({
      "edge_redlock.outcome": "acquired",
      "edge_redlock.quorum": 3,
      "edge_redlock.node_count": 5,
      "edge_redlock.attempts": 1,
      "edge_redlock.polls": 0,
      "edge_redlock.ttl_ms": 5000,
      "edge_redlock.ok": true,
      "edge_redlock.resource": "otel-test",
    });
    expect(acquire.attributes["edge_redlock.votes"]).toBeGreaterThanOrEqual(3);
    expect(acquire.attributes["edge_redlock.validity_ms"]).toBeGreaterThan(0);
    expect(acquire.attributes["edge_redlock.validity_ms"]).toBeLessThan(5000);
    expect(spanMs(acquire)).toBeLessThanOrEqual(acquiredAfter + 1);
    expect(eventsOf(acquire, "edge_redlock.node_answer").map((e) => e.attributes?.["edge_redlock.node"])).toEqual(
      NODE_IDS,
    );
    expect(eventsOf(acquire, "edge_redlock.acquire_attempt")).toHaveLength(1);
    for (const span of [verify, release]) {
      expect(span.links.map((l) => l.context.spanId)).toEqual([acquire.spanContext().spanId]);
      expect(span.attributes).toMatchObject({ "edge_redlock.ok": true, "edge_redlock.quorum": 3 });
      expect(eventsOf(span, "edge_redlock.node_answer")).toHaveLength(5);
      expect(span.status.code).toBe(0);
    }
    expectNoSecrets(points, spans, lock.token, key);
  });

  it("a contended acquisition: counted as contended, its wait within the holder's hold, polls and attempts as in its span", async () => {
    const { redlock, t } = client();
    const key = uniqueKey("otel-contended");
    const holder = await redlock.acquire(key, 5000);
    const waiterStarted = performance.now();
    const waiting = redlock.acquire(key, 5000);
    await sleep(300);
    const releaseSent = performance.now();
    await holder.release();
    const lock = await waiting;
    const waiterEnded = performance.now();
    expect(await redlock.tryAcquire(key, 5000)).toBeNull();
    await lock.release();
    const points = await t.metrics();

    const acquired = histogram(points, "edge_redlock.acquire.duration", { "edge_redlock.outcome": "acquired" });
    expect(acquired.count).toBe(2);
    // The waiter could not have the lock before its holder's release was sent.
    expect(ms(acquired.max)).toBeGreaterThanOrEqual(releaseSent - waiterStarted - 1);
    expect(ms(acquired.max)).toBeLessThanOrEqual(waiterEnded - waiterStarted);
    expect(histogram(points, "edge_redlock.acquire.duration", { "edge_redlock.outcome": "LOCK_HELD" }).count).toBe(1);
    // The waiter, and the tryAcquire() that found the lock held.
    expect(total(points, "edge_redlock.acquire.contended", { "edge_redlock.outcome": "acquired" })).toBe(1);
    expect(total(points, "edge_redlock.acquire.contended", { "edge_redlock.outcome": "LOCK_HELD" })).toBe(1);
    expect(total(points, "edge_redlock.acquire.contended")).toBe(2);
    expect(total(points, "edge_redlock.lock.held")).toBe(0);
    expect(histogram(points, "edge_redlock.lock.hold.duration").count).toBe(2);

    const acquires = named_(t.spans(), "edge_redlock.acquire");
    expect(acquires.map((s) => s.attributes["edge_redlock.outcome"])).toEqual(["acquired", "acquired", "LOCK_HELD"]);
    const waiter = acquires[1] as ReadableSpan;
    // The span and the metrics tell the same story: attempts, polls and the polls' requests (two
    // for a poll that found the gate's script not loaded yet).
    const attempts = eventsOf(waiter, "edge_redlock.acquire_attempt").length;
    const polls = eventsOf(waiter, "edge_redlock.poll").length;
    expect(waiter.attributes).toMatchObject({ "edge_redlock.attempts": attempts, "edge_redlock.polls": polls });
    expect(histogram(points, "edge_redlock.acquire.attempts", { "edge_redlock.outcome": "acquired" }).sum).toBe(
      1 + attempts,
    );
    expect(histogram(points, "edge_redlock.acquire.polls").sum).toBe(polls);
    const pollRequests = eventsOf(waiter, "edge_redlock.poll").map((e) => e.attributes?.["edge_redlock.requests"]);
    expect(pollRequests.every((n) => n === 1 || n === 2)).toBe(true);
    expect(total(points, "edge_redlock.node.requests", { "edge_redlock.operation": "poll" })).toBe(
      (pollRequests as number[]).reduce((a, b) => a + b, 0),
    );
    for (const poll of eventsOf(waiter, "edge_redlock.poll")) {
      expect(["held", "acquired"]).toContain(poll.attributes?.["edge_redlock.node.outcome"]);
    }
    expect(spanMs(waiter)).toBeGreaterThanOrEqual(releaseSent - waiterStarted - 1);
    expectNoSecrets(points, t.spans(), holder.token, lock.token, key);
  });

  it("outcomes are error codes: REQUEST_BUDGET, CONFIGURATION, INVALID_ARGUMENT, with the span's status", async () => {
    const { redlock, t } = client();
    const key = uniqueKey("otel-codes");
    const holder = await redlock.acquire(key, 5000);
    // The plain preset, waiting by backoff: an attempt and the release fit 10 requests on 5 nodes,
    // a second attempt does not.
    const plain = instrument(new CoreRedlock({ nodes: named(), requestTimeoutMs: 1000, retryBaseDelayMs: 1 }), {
      meter: t.meter,
      tracer: t.tracer,
    });
    await expect(plain.acquire(key, 5000, { requestBudget: 10 })).rejects.toMatchObject({ code: "REQUEST_BUDGET" });
    await expect(redlock.acquire("", 5000)).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await holder.release();
    const wrongToken = "wrong-token-that-must-not-leak";
    const rejected = instrument(
      new Redlock({ nodes: named().map((n) => ({ ...n, token: wrongToken })), requestTimeoutMs: 1000 }),
      { meter: t.meter, tracer: t.tracer },
    );
    await expect(rejected.acquire(key, 5000)).rejects.toMatchObject({ code: "CONFIGURATION" });
    const points = await t.metrics();

    const count = (outcome: string) =>
      histogram(points, "edge_redlock.acquire.duration", { "edge_redlock.outcome": outcome }).count;
    expect([count("acquired"), count("REQUEST_BUDGET"), count("INVALID_ARGUMENT"), count("CONFIGURATION")]).toEqual([
      1, 1, 1, 1,
    ]);
    expect(histogram(points, "edge_redlock.acquire.attempts", { "edge_redlock.outcome": "REQUEST_BUDGET" }).sum).toBe(
      1,
    );
    expect(histogram(points, "edge_redlock.acquire.attempts", { "edge_redlock.outcome": "INVALID_ARGUMENT" }).sum).toBe(
      0,
    );
    const failed = named_(t.spans(), "edge_redlock.acquire").filter(
      (s) => s.attributes["edge_redlock.outcome"] !== "acquired",
    );
    expect(failed.map((s) => [s.attributes["error.type"], s.status])).toEqual([
      ["REQUEST_BUDGET", { code: 2, message: "REQUEST_BUDGET" }],
      ["INVALID_ARGUMENT", { code: 2, message: "INVALID_ARGUMENT" }],
      ["CONFIGURATION", { code: 2, message: "CONFIGURATION" }],
    ]);
    expectNoSecrets(points, t.spans(), holder.token, key, wrongToken);
  });

  it("lost locks by reason: validity run out (expired), an extension finding it gone (not_held); counted once", async () => {
    await warmScripts();
    const { redlock, t } = client();
    const expiring = await redlock.acquire(uniqueKey("otel-expiring"), 600);
    const key = uniqueKey("otel-taken");
    const taken = await redlock.acquire(key, 5000);
    await Promise.all(endpoints().map((e) => raw(e, "DEL", key)));
    await expect(taken.extend()).rejects.toMatchObject({ code: "EXTEND_FAILED" });
    await sleep(800);
    expect(expiring.signal.aborted).toBe(true);
    // Released after the loss: the hold already ended, and is not counted again.
    await expiring.release();
    await taken.release();
    const points = await t.metrics();

    expect(total(points, "edge_redlock.lock.lost", { "edge_redlock.loss.reason": "expired" })).toBe(1);
    expect(total(points, "edge_redlock.lock.lost", { "edge_redlock.loss.reason": "not_held" })).toBe(1);
    expect(total(points, "edge_redlock.lock.lost")).toBe(2);
    expect(total(points, "edge_redlock.lock.held")).toBe(0);
    expect(histogram(points, "edge_redlock.lock.hold.duration", { "edge_redlock.hold.end": "lost" }).count).toBe(2);
    expect(histogram(points, "edge_redlock.lock.hold.duration", { "edge_redlock.hold.end": "released" }).count).toBe(0);
    expect(requestsByNode(points, "extend")).toEqual(Object.fromEntries(NODE_IDS.map((id) => [id, 1])));

    const [extend] = named_(t.spans(), "edge_redlock.extend");
    expect(extend?.attributes).toMatchObject({
      "edge_redlock.ok": false,
      "edge_redlock.votes": 0,
      "error.type": "EXTEND_FAILED",
    });
    expect(extend?.status.code).toBe(2);
    // Decided at the third "held": the others may still be answering.
    const answers = eventsOf(extend as ReadableSpan, "edge_redlock.node_answer").map(
      (e) => e.attributes?.["edge_redlock.node.outcome"],
    );
    expect(answers.filter((a) => a === "held").length).toBeGreaterThanOrEqual(3);
    expect(answers.filter((a) => a === "held" || a === "pending")).toHaveLength(5);
    expect(named_(t.spans(), "edge_redlock.release")).toHaveLength(2);
  });

  it("a node down: its requests counted as errors under its id, its answers as events without error text", async () => {
    await warmScripts();
    await nodesOf().kill(4);
    try {
      const { redlock, t } = client();
      const key = uniqueKey("otel-down");
      const lock = await redlock.acquire(key, 5000);
      await lock.release();
      const points = await t.metrics();

      expect(histogram(points, "edge_redlock.acquire.duration", { "edge_redlock.outcome": "acquired" }).count).toBe(1);
      for (const operation of ["acquire", "release"]) {
        expect(requestsByNode(points, operation)).toEqual(Object.fromEntries(NODE_IDS.map((id) => [id, 1])));
        const down = pointsOf(points, "edge_redlock.node.requests", {
          "edge_redlock.operation": operation,
          "edge_redlock.node": "node-5",
        });
        expect(down.map((p) => [p.attributes["edge_redlock.node.outcome"], p.value])).toEqual([["error", 1]]);
      }
      const [acquire] = named_(t.spans(), "edge_redlock.acquire");
      const answer = eventsOf(acquire as ReadableSpan, "edge_redlock.node_answer").find(
        (e) => e.attributes?.["edge_redlock.node"] === "node-5",
      );
      expect(answer?.attributes?.["edge_redlock.node.outcome"]).toBe("error");
      const allowed = [
        "edge_redlock.attempt",
        "edge_redlock.node",
        "edge_redlock.node.outcome",
        "edge_redlock.requests",
        "edge_redlock.latency_ms",
        "http.response.status_code",
      ];
      for (const span of t.spans()) {
        for (const event of eventsOf(span, "edge_redlock.node_answer")) {
          expect(allowed).toEqual(expect.arrayContaining(Object.keys(event.attributes ?? {})));
        }
      }
      expectNoSecrets(points, t.spans(), lock.token, key);
    } finally {
      await nodesOf().restart(4);
    }
  });
});
