/**
 * A plain Worker (no compatibility flags, so no Node.js API) that instruments a client with
 * edge-redlock/otel through the global providers of `@opentelemetry/api`, as an application does,
 * acquires and releases one lock, and answers what the SDK's in-memory reader and exporter hold.
 * Bundled with the SDK by test/integration/otel-workerd.test.ts.
 */
import { metrics, trace } from "@opentelemetry/api";
import { Redlock } from "../../../src/index.js";
import { instrument } from "../../../src/otel/index.js";
import { testTelemetry } from "../../support/otel.js";

export default {
  async fetch(request: Request): Promise<Response> {
    const { nodes, key } = (await request.json()) as {
      nodes: { url: string; token: string; id: string }[];
      key: string;
    };
    const t = testTelemetry();
    metrics.setGlobalMeterProvider(t.meterProvider);
    trace.setGlobalTracerProvider(t.tracerProvider);
    try {
      // A key prefix of its own: this client's node list (4 shared nodes and a dead one) is not
      // the other tests', and the nodes' cluster fingerprint is kept per key prefix.
      const redlock = instrument(new Redlock({ nodes, requestTimeoutMs: 2000, keyPrefix: `${key}:` }), {
        meter: metrics.getMeter("edge-redlock"),
        tracer: trace.getTracer("edge-redlock"),
      });
      const lock = await redlock.acquire(key, 5000);
      const heldWhileLocked = await t.metrics();
      await lock.release();
      const points = await t.metrics();
      const spans = t.spans().map((s) => ({
        name: s.name,
        attributes: s.attributes,
        events: s.events.map((e) => ({ name: e.name, attributes: e.attributes })),
        links: s.links.length,
      }));
      return Response.json({ heldWhileLocked, points, spans, token: lock.token });
    } finally {
      metrics.disable();
      trace.disable();
      await t.shutdown();
    }
  },
};
