/**
 * Warms the lock nodes' script caches with every Lua script of the library.
 * @module
 */
import { Redis } from "ioredis";
import { acquireAllScript } from "../../src/scripts/acquire-all.js";
import { extendScript } from "../../src/scripts/extend.js";
import { gateScript } from "../../src/scripts/gate.js";
import { gateReleaseScript } from "../../src/scripts/gate-release.js";
import { inspectScript } from "../../src/scripts/inspect.js";
import { releaseScript } from "../../src/scripts/release.js";
import { verifyScript } from "../../src/scripts/verify.js";
import type { HostNode } from "./node-host-protocol.js";

const SCRIPTS = [
  acquireAllScript,
  extendScript,
  gateScript,
  gateReleaseScript,
  inspectScript,
  releaseScript,
  verifyScript,
];

/**
 * `SCRIPT LOAD`s the library's scripts on every lock node, over the redis-server's own port (no
 * delay, not counted). Each part warms its clients up with an uncontended acquire and release,
 * which loads the scripts that path runs; the gate's poll runs only while a client waits, so the
 * first hot-key windows on each gate node counted a `NOSCRIPT` answer and the `EVAL` after it for
 * every waiter (7 of each at C = 8, about 0.4 requests per handoff in a 3 s window). A production
 * database keeps its scripts, and a window measures the steady state. The peers' scripts all run
 * on their uncontended path (or are sent whole every time), so their warm-up loads them.
 */
export async function preloadScripts(nodes: readonly HostNode[]): Promise<void> {
  await Promise.all(
    nodes.map(async (node) => {
      const redis = new Redis({ host: "127.0.0.1", port: node.redisPort, maxRetriesPerRequest: 1 });
      try {
        for (const script of SCRIPTS) {
          const sha1 = await redis.script("LOAD", script.source);
          if (sha1 !== script.sha1)
            throw new Error(`the ${script.name} script hashes to ${String(sha1)}, not its recorded sha1`);
        }
      } finally {
        redis.disconnect();
      }
    }),
  );
}
