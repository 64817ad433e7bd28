/**
 * `npm run nodes [-- --nodes N] [--out DIR] [--orphan-guard auto|pdeathsig|watchdog] [--verbose]`
 *
 * Starts N local nodes (default 5), prints their endpoints, writes them to DIR/endpoints.json and
 * DIR/.dev.vars (DIR defaults to `.nodes/` at the repository root, or $NODES_OUT_DIR), and keeps
 * running until Ctrl-C / SIGTERM / SIGHUP or until its parent process goes away. It then stops
 * every child and removes both files.
 */
import { fstatSync, mkdirSync, renameSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type NodeCluster, startNodes } from "./cluster.js";
import type { OrphanGuardMode } from "./orphan-guard.js";

const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The content of endpoints.json. */
export interface EndpointsFile {
  nodes: { url: string; token: string }[];
  /** PIDs of the redis-server processes. */
  pids: number[];
  /** PID of this supervisor. */
  supervisorPid: number;
  /** Temp directory of the nodes (removed on shutdown). */
  dataDir: string;
}

function parseCli() {
  const { values } = parseArgs({
    options: {
      nodes: { type: "string", short: "n", default: "5" },
      out: { type: "string" },
      "orphan-guard": { type: "string", default: "auto" },
      verbose: { type: "boolean", short: "v", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    process.stdout.write(
      "usage: npm run nodes -- [--nodes N] [--out DIR] [--orphan-guard auto|pdeathsig|watchdog] [--verbose]\n",
    );
    process.exit(0);
  }
  const count = Number(values.nodes);
  if (!Number.isInteger(count) || count < 1) throw new Error(`--nodes must be a positive integer, got ${values.nodes}`);
  const guard = values["orphan-guard"];
  if (guard !== "auto" && guard !== "pdeathsig" && guard !== "watchdog") {
    throw new Error(`--orphan-guard must be auto, pdeathsig or watchdog, got ${guard}`);
  }
  const outDir = resolve(values.out ?? process.env.NODES_OUT_DIR ?? join(REPO_ROOT, ".nodes"));
  return {
    count,
    outDir,
    guard: guard as OrphanGuardMode,
    verbose: values.verbose,
  };
}

/** Writes a file atomically (temp + rename), so a reader polling for it never sees half of it. */
function writeAtomic(path: string, content: string): void {
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, content);
  renameSync(temp, path);
}

function writeEndpoints(outDir: string, cluster: NodeCluster): string[] {
  mkdirSync(outDir, { recursive: true });
  const nodes = cluster.nodes.map(({ url, token }) => ({ url, token }));
  const file: EndpointsFile = {
    nodes,
    pids: cluster.pids(),
    supervisorPid: process.pid,
    dataDir: cluster.dataDir,
  };
  const devVars = join(outDir, ".dev.vars");
  const endpoints = join(outDir, "endpoints.json");
  // wrangler's .dev.vars is dotenv: single quotes keep the JSON (which has no single quote) verbatim.
  writeAtomic(devVars, `REDLOCK_NODES='${JSON.stringify(nodes)}'\n`);
  // endpoints.json last: its appearance tells pollers that everything is ready.
  writeAtomic(endpoints, `${JSON.stringify(file, null, 2)}\n`);
  return [endpoints, devVars];
}

function removeFiles(outDir: string, files: string[]): void {
  for (const file of files) rmSync(file, { force: true });
  try {
    rmdirSync(outDir); // only if now empty
  } catch {
    // not empty or already gone: leave it
  }
}

/** Whether stdin is a pipe or socket, whose end means the parent process is gone. */
function stdinIsPipe(): boolean {
  try {
    const stat = fstatSync(0);
    return stat.isFIFO() || stat.isSocket();
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  // The parent we were started by, read before anything else: read after endpoints.json was
  // written (which tells pollers we are ready), a parent that died in between was never seen to
  // go, and we outlived it (a `.ci/run` under load: the supervisor test's shell killed right then).
  const parent = process.ppid;
  const options = parseCli();
  const log = options.verbose ? (message: string) => process.stderr.write(`${message}\n`) : undefined;
  const started = performance.now();
  const cluster = await startNodes({
    count: options.count,
    orphanGuard: options.guard,
    ...(log ? { log } : {}),
  });
  const elapsed = Math.round(performance.now() - started);
  const files = writeEndpoints(options.outDir, cluster);

  const lines = cluster.nodes.map(
    (n) => `  node ${n.index}: url=${n.url} token=${n.token} redis-port=${n.redisPort} redis-pid=${n.pid}`,
  );
  const fromCwd = relative(process.cwd(), options.outDir);
  const shown = fromCwd === "" ? "." : fromCwd.startsWith("..") ? options.outDir : fromCwd;
  process.stdout.write(
    `started ${cluster.nodes.length} nodes in ${elapsed} ms\n${lines.join("\n")}\n` +
      `redis-server pids: ${cluster.pids().join(" ")}; supervisor pid: ${process.pid}\n` +
      `endpoints: ${join(shown, "endpoints.json")}, ${join(shown, ".dev.vars")}\n` +
      "press Ctrl-C to stop\n",
  );

  let shuttingDown = false;
  const shutdown = async (reason: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    process.stdout.write(`stopping (${reason})\n`);
    // If a child refuses to stop, exit anyway; the "exit" hook of startNodes SIGKILLs children.
    setTimeout(() => process.exit(1), 10_000).unref();
    removeFiles(options.outDir, files);
    await cluster.stop();
    process.exit(0);
  };

  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => void shutdown(signal));
  }
  // The parent died (we were re-parented): nobody is left to stop us. npm/tsx wrappers in between
  // relay signals, but not their own death by SIGKILL.
  const checkParent = () => {
    if (process.ppid !== parent) void shutdown("parent process exited");
  };
  checkParent();
  setInterval(checkParent, 250).unref();
  // When started with a piped stdin (e.g. from a test runner), its end also means the parent is
  // gone. A TTY or /dev/null stdin is ignored: Ctrl-C / signals are the way to stop then.
  if (stdinIsPipe()) {
    process.stdin.on("end", () => void shutdown("stdin closed"));
    process.stdin.on("error", () => void shutdown("stdin error"));
    process.stdin.resume();
  }
}

main().catch((err: Error) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
