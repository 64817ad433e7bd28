/** A minimal Worker that acquires and releases one lock with the plain preset, edge-redlock/core (bundle-size benchmark). */
import { Redlock } from "../../../src/core/index.js";

interface Env {
  REDLOCK_NODES: string;
}

export default {
  async fetch(_request: Request, env: Env): Promise<Response> {
    const redlock = new Redlock({ nodes: JSON.parse(env.REDLOCK_NODES) });
    const lock = await redlock.acquire("bench", 10_000);
    await lock.release();
    return new Response("ok");
  },
};
