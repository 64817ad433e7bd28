/** A minimal Worker that acquires and releases one lock, instrumented with edge-redlock/otel (bundle-size measurement). */
import type { Meter, Tracer } from "@opentelemetry/api";
import { Redlock } from "../../../src/index.js";
import { instrument } from "../../../src/otel/index.js";

interface Env {
  REDLOCK_NODES: string;
}
declare const telemetry: { meter: Meter; tracer: Tracer };

export default {
  async fetch(_request: Request, env: Env): Promise<Response> {
    const redlock = instrument(new Redlock({ nodes: JSON.parse(env.REDLOCK_NODES) }), telemetry);
    const lock = await redlock.acquire("bench", 10_000);
    await lock.release();
    return new Response("ok");
  },
};
