/** A minimal Worker that acquires and releases one lock with edge-redlock over @upstash/redis clients (bundle-size benchmark). */
import { Redis } from "@upstash/redis/cloudflare";
import { Redlock } from "../../../src/index.js";
import { upstashNodes } from "../../../src/upstash/index.js";

interface Env {
  REDLOCK_NODES: string;
}

export default {
  async fetch(_request: Request, env: Env): Promise<Response> {
    const endpoints = JSON.parse(env.REDLOCK_NODES) as { url: string; token: string }[];
    const redlock = new Redlock({ nodes: upstashNodes(endpoints.map((e) => new Redis(e))) });
    const lock = await redlock.acquire("bench", 10_000);
    await lock.release();
    return new Response("ok");
  },
};
