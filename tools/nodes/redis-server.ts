import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import type { OrphanGuard } from "./orphan-guard.js";
import { signalProcess, sleep } from "./process-utils.js";

/** A redis-server child process. */
export interface RedisServerProcess {
  readonly pid: number;
  readonly port: number;
  /** Resolves when the process has exited (and been reaped). */
  readonly exited: Promise<void>;
  /** Whether the process has not exited yet. */
  isRunning(): boolean;
  /** Sends a signal (no-op once exited). */
  signal(signal: NodeJS.Signals): void;
  /** Stops it (SIGCONT + SIGTERM, SIGKILL after `graceMs`) and waits for the exit. */
  stop(graceMs?: number): Promise<void>;
}

/** Options of {@link startRedisServer}. */
export interface StartRedisOptions {
  /** Path of the redis-server binary. */
  binary: string;
  /** Working directory for redis-server (`--dir`); nothing is written there with these settings. */
  dir: string;
  /** Port to use; when omitted a free loopback port is picked (retrying if it gets taken). */
  port?: number;
  guard: OrphanGuard;
  log?: ((message: string) => void) | undefined;
  /** How long to wait for "Ready to accept connections". Default 5000 ms. */
  readyTimeoutMs?: number;
}

/** Asks the OS for a free TCP port on 127.0.0.1. */
export async function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/**
 * Starts a redis-server on 127.0.0.1 without persistence and resolves once it accepts
 * connections. With a port picked here there is a small window in which another process can take
 * it; a bind failure is then retried on another port.
 */
export async function startRedisServer(options: StartRedisOptions): Promise<RedisServerProcess> {
  const attempts = options.port === undefined ? 5 : 1;
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const port = options.port ?? (await findFreePort());
    try {
      return await startOnPort(options, port);
    } catch (err) {
      lastError = err as Error;
      if (!/address already in use/i.test(lastError.message)) throw lastError;
    }
  }
  throw lastError;
}

async function startOnPort(options: StartRedisOptions, port: number): Promise<RedisServerProcess> {
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    // No RDB snapshots and no AOF: nothing is written to --dir, and a restart starts empty.
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    options.dir,
    "--daemonize",
    "no",
    // Log to stdout (read below), never to a file.
    "--logfile",
    "",
    "--loglevel",
    "notice",
  ];
  const { command, args: wrappedArgs } = options.guard.wrap(options.binary, args);
  const child = spawn(command, wrappedArgs, {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const pid = child.pid;
  if (pid === undefined) {
    const error = await new Promise<Error>((resolve) => child.once("error", resolve));
    throw new Error(`could not start ${options.binary}: ${error.message}`);
  }
  options.guard.track(pid);

  let running = true;
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => {
      running = false;
      options.guard.untrack(pid);
      resolve();
    });
  });

  try {
    await waitForReady(child, port, options);
  } catch (err) {
    signalProcess(pid, "SIGKILL");
    await exited;
    throw err;
  }

  const signal = (sig: NodeJS.Signals) => {
    if (running) signalProcess(pid, sig);
  };
  return {
    pid,
    port,
    exited,
    isRunning: () => running,
    signal,
    async stop(graceMs = 2_000) {
      if (!running) return;
      // A paused (SIGSTOP) server would keep SIGTERM pending forever: continue it first.
      signal("SIGCONT");
      signal("SIGTERM");
      const timer = setTimeout(() => signal("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * Waits for the "Ready to accept connections" log line (printed once the listening socket is
 * open), and keeps draining the output afterwards so a full pipe can never block redis-server.
 */
function waitForReady(child: ChildProcess, port: number, options: StartRedisOptions): Promise<void> {
  const recent: string[] = [];
  return new Promise<void>((resolve, reject) => {
    let ready = false;
    const onLine = (line: string) => {
      recent.push(line);
      if (recent.length > 20) recent.shift();
      options.log?.(`redis:${port} ${line}`);
      if (!ready && line.includes("Ready to accept connections")) {
        ready = true;
        clearTimeout(timer);
        resolve();
      }
    };
    for (const stream of [child.stdout, child.stderr]) {
      let pending = "";
      stream?.setEncoding("utf8");
      stream?.on("data", (chunk: string) => {
        pending += chunk;
        const lines = pending.split("\n");
        pending = lines.pop() ?? "";
        for (const line of lines) onLine(line);
      });
    }
    const timeoutMs = options.readyTimeoutMs ?? 5_000;
    const timer = setTimeout(
      () => reject(new Error(`redis-server on port ${port} not ready after ${timeoutMs} ms:\n${recent.join("\n")}`)),
      timeoutMs,
    );
    child.once("exit", (code, sig) => {
      clearTimeout(timer);
      // Let the last output arrive before reporting it.
      void sleep(10).then(() =>
        reject(
          new Error(`redis-server on port ${port} exited (${sig ?? code}) before it was ready:\n${recent.join("\n")}`),
        ),
      );
    });
  });
}
