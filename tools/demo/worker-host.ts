/**
 * Runs the demo worker in workerd through Miniflare, in a process of its own so that the demo can
 * stop it, and the workerd it started, by one process-group ID.
 *
 * Protocol: the parent writes one JSON line ({@link WorkerHostRequest}) to stdin and keeps stdin
 * open; this process answers one JSON line ({@link WorkerHostReady}) on stdout once the worker
 * listens. When stdin closes (the parent stopped it, or died) the worker is disposed and this
 * process exits.
 *
 * Why not `wrangler dev`: its inspector proxy turns on the worker's network events and POSTs
 * every one of them to wrangler's Node process, with nothing bounding how many are in flight.
 * The locked demo makes about 15k outbound fetches in seconds; that flood exhausted the proxy's
 * file descriptors and dropped the demo's connections. Why not `unstable_startWorker` with the
 * inspector off either: it still puts a proxy worker, in a second workerd, in front of the worker,
 * and under heavy machine load that extra TCP hop dropped a few requests ("Your worker restarted
 * mid-request"). Here the demo's requests reach the worker's own workerd directly.
 */
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { unstable_readConfig } from "wrangler";
import { bundleWorker } from "./bundle.js";

/** What the parent sends. */
export interface WorkerHostRequest {
  /** Plain-text bindings (the nodes as JSON, the API secret). */
  bindings: Record<string, string>;
  /** Port to listen on; 0 picks a free one. */
  port: number;
  /**
   * Whether to open workerd's DevTools inspector (on 127.0.0.1:9229). Only for interactive
   * debugging: with DevTools attached, every outgoing request of the worker becomes an event.
   */
  inspector: boolean;
}

/** What this process answers once the worker listens. */
export interface WorkerHostReady {
  url: string;
  inspectorUrl?: string;
}

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const INSPECTOR_PORT = 9229;

async function main(): Promise<void> {
  const lines = createInterface({ input: process.stdin });
  const first = await new Promise<string>((resolve, reject) => {
    lines.once("line", resolve);
    lines.once("close", () => reject(new Error("worker host: stdin closed before the request")));
  });
  const request = JSON.parse(first) as WorkerHostRequest;
  // wrangler.toml stays the one description of the worker: entry point and compatibility.
  const config = unstable_readConfig({ config: `${ROOT}wrangler.toml` });
  if (!config.main) throw new Error("wrangler.toml has no main");
  const mf = new Miniflare({
    name: config.name,
    modules: true,
    // Bundled as wrangler would: ESM, for workerd.
    script: await bundleWorker(config.main),
    compatibilityDate: config.compatibility_date,
    compatibilityFlags: config.compatibility_flags,
    bindings: request.bindings,
    host: "127.0.0.1",
    port: request.port,
    ...(request.inspector ? { inspectorPort: INSPECTOR_PORT } : {}),
  });
  let disposing = false;
  const shutdown = (code: number) => {
    if (disposing) return;
    disposing = true;
    mf.dispose().then(
      () => process.exit(code),
      () => process.exit(1),
    );
  };
  // The parent closed stdin (a deliberate stop), or died: either way, take workerd down with us.
  lines.on("close", () => shutdown(0));
  const url = await mf.ready;
  const ready: WorkerHostReady = { url: String(url).replace(/\/$/, "") };
  // DevTools (chrome://inspect, "Configure…" 127.0.0.1:9229) lists the worker under this URL.
  if (request.inspector) ready.inspectorUrl = `ws://127.0.0.1:${INSPECTOR_PORT}/core:user:${config.name ?? ""}`;
  process.stdout.write(`${JSON.stringify(ready)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`worker host: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
