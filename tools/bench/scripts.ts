/**
 * The library's Lua scripts, as the bench finds them in the scripts/ folders of src/, and a warm start for the
 * lock nodes' script caches.
 * @module
 */
import { readdirSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Redis } from "ioredis";
import type { HostNode } from "./node-host-protocol.js";

/**
 * Every Script object exported by the scripts/ folders of src/ (or of `srcDir`, another
 * revision's src/ folder ending in a slash): name, SHA-1 and source.
 */
export async function libraryScripts(srcDir?: string): Promise<{ name: string; sha1: string; source: string }[]> {
  const src = srcDir ?? fileURLToPath(new URL("../../src/", import.meta.url));
  const files = readdirSync(src, { recursive: true, encoding: "utf8" }).filter((f) =>
    /(^|\/)scripts\/[^/]+\.ts$/.test(f),
  );
  const found: { name: string; sha1: string; source: string }[] = [];
  for (const file of files) {
    const module = (await import(pathToFileURL(`${src}${file}`).href)) as Record<string, unknown>;
    for (const value of Object.values(module)) {
      const script = value as { name?: unknown; sha1?: unknown; source?: unknown };
      if (typeof script?.name === "string" && typeof script.sha1 === "string" && typeof script.source === "string") {
        found.push({ name: script.name, sha1: script.sha1, source: script.source });
      }
    }
  }
  return found;
}

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
  const scripts = await libraryScripts();
  await Promise.all(
    nodes.map(async (node) => {
      const redis = new Redis({ host: "127.0.0.1", port: node.redisPort, maxRetriesPerRequest: 1 });
      try {
        for (const script of scripts) {
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
