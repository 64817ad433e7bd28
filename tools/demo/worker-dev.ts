/**
 * Starts the local nodes and the demo worker (workerd through Miniflare, in a child process of its
 * own: see worker-host.ts), and stops both. Used by `npm run demo` and `npm run dev`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { type NodeCluster, startNodes } from "../nodes/index.js";
import type { WorkerHostReady, WorkerHostRequest } from "./worker-host.js";

export interface DemoStack {
  /** The tail of the worker host's output (workerd's logs). */
  output(): string;
  readonly cluster: NodeCluster;
  /** The worker's base URL. */
  readonly url: string;
  /** The worker's API secret (Bearer). */
  readonly secret: string;
  /** DevTools inspector URL, when started with `inspector: true`. */
  readonly inspectorUrl: string | undefined;
  /** PID of the worker host process (its process group holds every workerd it started). */
  readonly workerPid: number;
  /** Stops the worker (and its workerd processes) by PID, then the nodes. Idempotent. */
  stop(): Promise<void>;
}

/** Options of {@link startDemoStack}. */
export interface DemoStackOptions {
  /**
   * Number of local nodes.
   * @default 5
   */
  nodes?: number;
  /**
   * Port of the worker; 0 picks a free one.
   * @default 0
   */
  port?: number;
  /**
   * Open workerd's DevTools inspector on 127.0.0.1:9229 (directly, no proxy in between). With
   * DevTools attached every outgoing request of the worker becomes an event: for stepping through
   * a few requests, not for load.
   * @default false
   */
  inspector?: boolean;
}

const STARTUP_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 5_000;
const HOST_SCRIPT = fileURLToPath(new URL("./worker-host.ts", import.meta.url));

export async function startDemoStack(options: DemoStackOptions = {}): Promise<DemoStack> {
  const cluster = await startNodes({ count: options.nodes ?? 5 });
  const secret = randomBytes(16).toString("hex");
  const host = spawnHost();
  let output = "";
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-16_384);
  };
  host.stderr?.on("data", keep);
  // Even if this process dies on an uncaught error, take the host's process group with it.
  const killGroup = () => signalGroup(host, "SIGKILL");
  process.once("exit", killGroup);

  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      await stopHost(host);
      process.removeListener("exit", killGroup);
      await cluster.stop();
    })();
    return stopped;
  };

  try {
    const request: WorkerHostRequest = {
      bindings: {
        REDLOCK_NODES: JSON.stringify(cluster.nodes.map(({ url, token }) => ({ url, token }))),
        API_SECRET: secret,
      },
      port: options.port ?? 0,
      inspector: options.inspector ?? false,
    };
    host.stdin?.write(`${JSON.stringify(request)}\n`);
    const ready = await waitForReady(host, keep, () => output);
    await waitForWorker(ready.url, secret, host, () => output);
    return {
      cluster,
      url: ready.url,
      secret,
      inspectorUrl: ready.inspectorUrl,
      workerPid: host.pid as number,
      stop,
      output: () => output,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

function spawnHost(): ChildProcess {
  const tsx = createRequire(import.meta.url).resolve("tsx");
  return spawn(process.execPath, ["--import", tsx, HOST_SCRIPT], {
    // Its own process group: stopping it by PID also stops the workerd processes it starts.
    detached: true,
    stdio: ["pipe", "pipe", "pipe"],
    env: {
      ...process.env,
      WRANGLER_SEND_METRICS: "false",
      CLOUDFLARE_CF_FETCH_ENABLED: "false",
      WRANGLER_SEND_ERROR_REPORTS: "false",
      WRANGLER_HIDE_BANNER: "true",
    },
  });
}

/** Reads the host's stdout until its ready line; everything else is kept as output. */
function waitForReady(
  host: ChildProcess,
  keep: (chunk: Buffer) => void,
  output: () => string,
): Promise<WorkerHostReady> {
  return new Promise((resolve, reject) => {
    let pending = "";
    const timer = setTimeout(
      () => fail(new Error(`the worker did not start within 60 s:\n${output()}`)),
      STARTUP_TIMEOUT_MS,
    );
    const onExit = (code: number | null) => fail(new Error(`the worker host exited (${code}):\n${output()}`));
    const onData = (chunk: Buffer) => {
      keep(chunk);
      pending += chunk.toString();
      for (let newline = pending.indexOf("\n"); newline !== -1; newline = pending.indexOf("\n")) {
        const line = pending.slice(0, newline);
        pending = pending.slice(newline + 1);
        if (!line.startsWith('{"url"')) continue;
        cleanup();
        // Keep draining stdout (wrangler's log lines) so the host never blocks on a full pipe.
        host.stdout?.on("data", keep);
        resolve(JSON.parse(line) as WorkerHostReady);
        return;
      }
    };
    const fail = (error: Error) => {
      cleanup();
      reject(error);
    };
    const cleanup = () => {
      clearTimeout(timer);
      host.stdout?.off("data", onData);
      host.off("exit", onExit);
    };
    host.stdout?.on("data", onData);
    host.once("exit", onExit);
  });
}

async function waitForWorker(url: string, secret: string, host: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (host.exitCode !== null) throw new Error(`the worker host exited (${host.exitCode}):\n${output()}`);
    try {
      const response = await fetch(`${url}/counter/ping`, { headers: { authorization: `Bearer ${secret}` } });
      if (response.status === 200) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`the worker did not answer within 60 s:\n${output()}`);
}

/** Closes the host's stdin (it disposes the worker and exits); SIGKILLs its group after a grace period. */
async function stopHost(host: ChildProcess): Promise<void> {
  if (host.pid === undefined) return;
  if (host.exitCode === null && host.signalCode === null) {
    const exited = new Promise((resolve) => host.once("exit", resolve));
    host.stdin?.end();
    const timer = setTimeout(() => signalGroup(host, "SIGKILL"), STOP_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }
  // The host is gone; make sure nothing it started outlives it in its group.
  signalGroup(host, "SIGKILL");
}

function signalGroup(host: ChildProcess, signal: NodeJS.Signals): void {
  if (host.pid === undefined) return;
  try {
    process.kill(-host.pid, signal);
  } catch {
    // The group is already empty.
  }
}
