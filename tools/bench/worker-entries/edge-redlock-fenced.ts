/** A minimal Worker that acquires and releases one fenced lock with edge-redlock (bundle-size benchmark). */
import { fencing } from "../../../src/fencing/index.js";
import { Redlock } from "../../../src/index.js";

interface Env {
  REDLOCK_NODES: string;
}

export default {
  async fetch(_request: Request, env: Env): Promise<Response> {
    const redlock = new Redlock({ nodes: JSON.parse(env.REDLOCK_NODES), fencing });
    const lock = await redlock.acquire("bench", 10_000);
    await lock.release();
    return new Response(lock.fence ?? "");
  },
};
