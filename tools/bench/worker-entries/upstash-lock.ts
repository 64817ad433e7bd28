/** A minimal Worker that acquires and releases one lock with @upstash/lock (bundle-size benchmark). */
import { Lock } from "@upstash/lock";
import { Redis } from "@upstash/redis/cloudflare";

interface Env {
  UPSTASH_REDIS_REST_URL: string;
  UPSTASH_REDIS_REST_TOKEN: string;
}

export default {
  async fetch(_request: Request, env: Env): Promise<Response> {
    const redis = new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN });
    const lock = new Lock({ id: "bench", redis, lease: 10_000 });
    if (await lock.acquire()) await lock.release();
    return new Response("ok");
  },
};
