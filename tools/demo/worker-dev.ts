/**
 * Starts the local nodes and the demo worker under `wrangler dev` (offline, telemetry off), and
 * stops both. Used by `npm run demo` and `npm run dev`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type NodeCluster, startNodes } from "../nodes/index.js";

export interface DemoStack {
  /** The tail of wrangler dev's output. */
  output(): string;
  readonly cluster: NodeCluster;
  /** The worker's base URL. */
  readonly url: string;
  /** The worker's API secret (Bearer). */
  readonly secret: string;
  stop(): Promise<void>;
}

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

export async function startDemoStack(options: { nodes?: number } = {}): Promise<DemoStack> {
  const cluster = await startNodes({ count: options.nodes ?? 5 });
  const secret = randomBytes(16).toString("hex");
  const dir = mkdtempSync(join(tmpdir(), "edge-redlock-demo-"));
  const envFile = join(dir, ".env");
  const nodes = cluster.nodes.map(({ url, token }) => ({ url, token }));
  writeFileSync(envFile, `REDLOCK_NODES='${JSON.stringify(nodes)}'\nAPI_SECRET=${secret}\n`);
  const port = await freePort();
  const wranglerBin = join(
    dirname(createRequire(import.meta.url).resolve("wrangler/package.json")),
    "bin",
    "wrangler.js",
  );
  const wrangler = spawn(
    process.execPath,
    [
      wranglerBin,
      "dev",
      "--port",
      String(port),
      "--ip",
      "127.0.0.1",
      "--env-file",
      envFile,
      "--show-interactive-dev-session=false",
      "--log-level",
      "warn",
    ],
    {
      cwd: root,
      // Its own process group, so stopping it also stops the workerd it starts.
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        WRANGLER_SEND_METRICS: "false",
        CLOUDFLARE_CF_FETCH_ENABLED: "false",
        WRANGLER_SEND_ERROR_REPORTS: "false",
        WRANGLER_HIDE_BANNER: "true",
      },
    },
  );
  // Keep the tail of wrangler's output for error messages, bounded.
  let output = "";
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-16_384);
  };
  wrangler.stdout?.on("data", keep);
  wrangler.stderr?.on("data", keep);
  // Even if this process dies on an uncaught error, take wrangler's process group with it.
  const killGroup = () => {
    try {
      if (wrangler.pid !== undefined && wrangler.exitCode === null) process.kill(-wrangler.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  };
  process.once("exit", killGroup);
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    await stopGroup(wrangler);
    process.removeListener("exit", killGroup);
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitForWorker(url, secret, wrangler, () => output);
  } catch (error) {
    await stop();
    throw error;
  }
  return { cluster, url, secret, stop, output: () => output };
}

async function waitForWorker(url: string, secret: string, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited (${child.exitCode}):\n${output()}`);
    try {
      const response = await fetch(`${url}/counter/ping`, { headers: { authorization: `Bearer ${secret}` } });
      if (response.status === 200) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`wrangler dev did not answer within 60 s:\n${output()}`);
}

async function stopGroup(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.pid === undefined) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  try {
    process.kill(-child.pid, "SIGTERM");
  } catch {
    return;
  }
  // wrangler dev does not always honour SIGTERM while its runtime is busy.
  const timer = setTimeout(() => {
    try {
      process.kill(-(child.pid as number), "SIGKILL");
    } catch {
      // Already gone.
    }
  }, 2000);
  await exited;
  clearTimeout(timer);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
