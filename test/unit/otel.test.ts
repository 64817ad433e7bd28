/**
 * `instrument()` on memory nodes: it runs beside the client's own hooks and a call's hooks, a hook
 * that throws breaks neither, resource names stay out unless mapped, a lock's hold ends once, and
 * the secret check of the integration tests catches a secret that does reach an attribute.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { type AttemptReport, Redlock } from "../../src/index.js";
import { instrument } from "../../src/otel/index.js";
import { memoryNodes } from "../../src/testing/index.js";
import { everything, histogram, type TestTelemetry, testTelemetry, total } from "../support/otel.js";

let telemetry: TestTelemetry | undefined;
afterEach(async () => {
  await telemetry?.shutdown();
  telemetry = undefined;
});
function setUp(): TestTelemetry {
  telemetry = testTelemetry();
  return telemetry;
}

describe("instrument()", () => {
  it("runs beside the client's hooks and a call's own hooks: all of them are told", async () => {
    const t = setUp();
    const clientHook = vi.fn<(report: AttemptReport) => void>();
    const callHook = vi.fn<(report: AttemptReport) => void>();
    const redlock = instrument(new Redlock({ nodes: memoryNodes(3), onAttempt: clientHook }), {
      meter: t.meter,
      tracer: t.tracer,
    });
    const first = await redlock.acquire("a", 10_000);
    await first.release();
    // A call's own hook replaces the client's for that call, as without instrumentation.
    const second = await redlock.acquire("b", 10_000, { onAttempt: callHook });
    await second.release();
    expect(clientHook.mock.calls.map(([r]) => r.operation)).toEqual(["acquire", "release"]);
    expect(callHook.mock.calls.map(([r]) => r.operation)).toEqual(["acquire", "release"]);
    const points = await t.metrics();
    expect(histogram(points, "edge_redlock.acquire.duration").count).toBe(2);
    expect(t.spans().map((s) => s.name)).toEqual([
      "edge_redlock.acquire",
      "edge_redlock.release",
      "edge_redlock.acquire",
      "edge_redlock.release",
    ]);
  });

  it("a user hook that throws does not stop the instrumentation, nor the lock", async () => {
    const t = setUp();
    const redlock = instrument(
      new Redlock({
        nodes: memoryNodes(3),
        onAttempt: () => {
          throw new Error("broken logger");
        },
      }),
      { meter: t.meter },
    );
    await (await redlock.acquire("a", 10_000)).release();
    const points = await t.metrics();
    expect(histogram(points, "edge_redlock.acquire.duration", { "edge_redlock.outcome": "acquired" }).count).toBe(1);
    expect(total(points, "edge_redlock.lock.held")).toBe(0);
  });

  it("keeps resource names out of every attribute unless mapped; a mapping that throws sets none", async () => {
    const t = setUp();
    const nodes = memoryNodes(3);
    const mapped = instrument(new Redlock({ nodes }), {
      meter: t.meter,
      tracer: t.tracer,
      resourceAttribute: ([r]) => (r?.startsWith("invoice:") ? "invoice" : undefined),
    });
    await (await mapped.acquire("invoice:4711", 10_000)).release();
    await (await mapped.acquire("order:0815", 10_000)).release();
    const throwing = instrument(new Redlock({ nodes }), {
      meter: t.meter,
      resourceAttribute: () => {
        throw new Error("no");
      },
    });
    await (await throwing.acquire("invoice:4712", 10_000)).release();
    const points = await t.metrics();
    const text = everything(points, t.spans());
    for (const name of ["4711", "0815", "4712", "order"]) expect(text).not.toContain(name);
    expect(
      histogram(points, "edge_redlock.acquire.duration", {
        "edge_redlock.resource": "invoice",
      }).count,
    ).toBe(1);
    expect(histogram(points, "edge_redlock.acquire.duration").count).toBe(3);
  });

  it("ends a hold once: a lock lost and then released counts one loss and one hold", async () => {
    const t = setUp();
    const redlock = instrument(new Redlock({ nodes: memoryNodes(3) }), { meter: t.meter });
    const lock = await redlock.acquire("short", 200);
    await new Promise((resolve) => lock.signal.addEventListener("abort", resolve));
    await lock.release();
    await lock.release();
    const points = await t.metrics();
    expect(total(points, "edge_redlock.lock.lost", { "edge_redlock.loss.reason": "expired" })).toBe(1);
    expect(total(points, "edge_redlock.lock.held")).toBe(0);
    expect(histogram(points, "edge_redlock.lock.hold.duration").count).toBe(1);
  });

  it("passes an options value that is not an object on to the client, which refuses it", async () => {
    const t = setUp();
    const redlock = instrument(new Redlock({ nodes: memoryNodes(3) }), { meter: t.meter });
    await expect(redlock.acquire("a", 10_000, 5 as never)).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    const points = await t.metrics();
    expect(
      histogram(points, "edge_redlock.acquire.duration", { "edge_redlock.outcome": "INVALID_ARGUMENT" }).count,
    ).toBe(1);
  });

  it("without a meter or a tracer it does nothing but pass the calls on", async () => {
    const redlock = instrument(new Redlock({ nodes: memoryNodes(3) }));
    const lock = await redlock.using("a", 10_000, async (_signal, lock) => lock.token);
    expect(typeof lock).toBe("string");
  });

  it("negative control: the secret check finds a token that reaches an attribute", async () => {
    const t = setUp();
    const redlock = new Redlock({ nodes: memoryNodes(3) });
    const lock = await redlock.acquire("a", 10_000);
    const leaky = t.tracer.startSpan("leak", { attributes: { holder: `token ${lock.token}` } });
    leaky.end();
    expect(everything(await t.metrics(), t.spans())).toContain(lock.token);
    await lock.release();
  });
});

describe("contention", () => {
  it("counts every acquisition that waited, including those a release of the isolate handed the lock to", async () => {
    const t = setUp();
    const redlock = instrument(new Redlock({ nodes: memoryNodes(5) }), { meter: t.meter, tracer: t.tracer });
    const callers = 40;
    // Callers arrive one by one while the lock is busy, as the requests of a Worker do.
    await Promise.all(
      Array.from({ length: callers }, async (_, i) => {
        await new Promise((resolve) => setTimeout(resolve, 3 * i));
        await redlock.using("busy", 10_000, () => new Promise((resolve) => setTimeout(resolve, 8)));
      }),
    );
    const points = await t.metrics();
    expect(histogram(points, "edge_redlock.acquire.duration", { "edge_redlock.outcome": "acquired" }).count).toBe(
      callers,
    );
    // Only one caller can have had the lock at once from its first try; every other waited.
    expect(total(points, "edge_redlock.acquire.contended")).toBeGreaterThanOrEqual(callers - 1);
  });
});
