/**
 * A worker for test/integration/ended-request.test.ts: one Redlock client shared by every request
 * of the isolate (as a worker's module-level client is), and a gate node that sends a release's
 * `EVALSHA` on only after `?gateReleaseDelayMs=`. That delay is a timer of the request that
 * releases: once that request has ended, workerd cancels the timer with the rest of its I/O, and
 * the release never reaches the gate.
 *
 * `?release=using` (the default): `using()` with `waitUntil`. `?release=plain`: acquire, hold,
 * and hand `lock.release()` to `ctx.waitUntil`, which ends at the release's quorum. `?ttlMs=`:
 * the lock's TTL; its requests' deadline is a tenth of it.
 */
import { type RedisNode, Redlock, restNode } from "../../../src/index.js";
import { gateReleaseScript } from "../../../src/waiting/scripts/gate-release.js";

interface Env {
  NODES: string;
}

interface Context {
  waitUntil(promise: Promise<unknown>): void;
}

let redlock: Redlock | undefined;
/** The delay the latest request asked for (the tests do not overlap requests that differ). */
let gateReleaseDelayMs = 0;

function client(env: Env): Redlock {
  const nodes = (JSON.parse(env.NODES) as { url: string; token: string }[]).map((config): RedisNode => {
    // The wrapper's id is the node's URL: the other tests' clients of these shared nodes are the
    // same cluster, and a wrapper is known to the cluster fingerprint by its id.
    const node = restNode(config);
    return {
      id: node.id,
      async command(args, signal) {
        if (args[0] === "EVALSHA" && args[1] === gateReleaseScript.sha1) {
          await new Promise((resolve) => setTimeout(resolve, gateReleaseDelayMs));
        }
        signal.throwIfAborted();
        return node.command(args, signal);
      },
    };
  });
  redlock ??= new Redlock({ nodes });
  return redlock;
}

async function holdLock(url: URL, env: Env, ctx: Context): Promise<void> {
  const resource = url.searchParams.get("resource") ?? "r";
  const holdMs = Number(url.searchParams.get("holdMs") ?? 0);
  const ttlMs = Number(url.searchParams.get("ttlMs") ?? 10_000);
  gateReleaseDelayMs = Number(url.searchParams.get("gateReleaseDelayMs") ?? 0);
  const hold = () => new Promise((resolve) => setTimeout(resolve, holdMs));
  if (url.searchParams.get("release") === "plain") {
    const lock = await client(env).acquire(resource, ttlMs);
    await hold();
    ctx.waitUntil(lock.release());
    return;
  }
  await client(env).using(resource, ttlMs, hold, { waitUntil: (promise) => ctx.waitUntil(promise) });
}

export default {
  async fetch(request: Request, env: Env, ctx: Context): Promise<Response> {
    try {
      const url = new URL(request.url);
      // `?settled=1`: answer with what `settled()` resolves with, once it has.
      if (url.searchParams.has("settled")) return Response.json(await client(env).settled());
      await holdLock(url, env, ctx);
      return Response.json({ held: true });
    } catch (error) {
      const { code, message } = error as { code?: string; message?: string };
      return Response.json({ code, message }, { status: 500 });
    }
  },
};
