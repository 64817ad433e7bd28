/**
 * Runs the demo worker in workerd through wrangler's programmatic API (`unstable_startWorker`),
 * in a process of its own so that the demo can stop it, and every workerd it started, by one
 * process-group ID.
 *
 * Protocol: the parent writes one JSON line ({@link WorkerHostRequest}) to stdin and keeps stdin
 * open; this process answers one JSON line ({@link WorkerHostReady}) on stdout once the worker
 * listens. When stdin closes (the parent stopped it, or died) the worker is disposed and this
 * process exits.
 *
 * Why not `wrangler dev`: its inspector proxy turns on the worker's network events and POSTs
 * every one of them to wrangler's Node process, with nothing bounding how many are in flight.
 * The locked demo makes about 15k outbound fetches in seconds; that flood exhausted the proxy's
 * file descriptors and dropped the demo's connections. `inspector: false` removes the proxy.
 */
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { unstable_startWorker } from "wrangler";

/** What the parent sends. */
export interface WorkerHostRequest {
  /** Plain-text bindings (the nodes as JSON, the API secret). */
  bindings: Record<string, string>;
  /** Port to listen on; 0 picks a free one. */
  port: number;
  /**
   * Whether to start wrangler's DevTools inspector proxy. Only for interactive debugging: under
   * heavy subrequest load the proxy is what fails (see the module comment).
   */
  inspector: boolean;
}

/** What this process answers once the worker listens. */
export interface WorkerHostReady {
  url: string;
  inspectorUrl?: string;
}

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

async function main(): Promise<void> {
  const lines = createInterface({ input: process.stdin });
  const first = await new Promise<string>((resolve, reject) => {
    lines.once("line", resolve);
    lines.once("close", () => reject(new Error("worker host: stdin closed before the request")));
  });
  const request = JSON.parse(first) as WorkerHostRequest;
  const worker = await unstable_startWorker({
    config: `${ROOT}wrangler.toml`,
    // No .env / .dev.vars from the checkout: the bindings below are the whole configuration.
    envFiles: [],
    bindings: Object.fromEntries(
      Object.entries(request.bindings).map(([name, value]) => [name, { type: "plain_text", value }]),
    ),
    sendMetrics: false,
    dev: {
      server: { hostname: "127.0.0.1", port: request.port },
      inspector: request.inspector ? { hostname: "127.0.0.1" } : false,
      watch: false,
      remote: false,
      persist: false,
      logLevel: "warn",
    },
  });
  let disposing = false;
  const shutdown = (code: number) => {
    if (disposing) return;
    disposing = true;
    worker.dispose().then(
      () => process.exit(code),
      () => process.exit(1),
    );
  };
  // The parent closed stdin (a deliberate stop), or died: either way, take workerd down with us.
  lines.on("close", () => shutdown(0));
  await worker.ready;
  const ready: WorkerHostReady = { url: String(await worker.url).replace(/\/$/, "") };
  const inspectorUrl = await worker.inspectorUrl;
  if (inspectorUrl) ready.inspectorUrl = String(inspectorUrl);
  process.stdout.write(`${JSON.stringify(ready)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`worker host: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
