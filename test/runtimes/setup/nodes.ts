/**
 * vitest globalSetup of the runtime projects: 5 local nodes (real redis-server + REST bridge),
 * provided as `nodes`, shared by every runtime project of the run (each case uses its own keys).
 *
 * Unlike test/support/global-setup.ts, this does not import tools/nodes into the vitest process:
 * it runs the node supervisor CLI (tools/nodes/cli.ts) as a child process. The workerd project's
 * pool makes vite inline every dependency of the project, its globalSetup included, and ioredis
 * (used by the bridges) breaks when inlined ("Cannot redefine property: default"). A child
 * process also keeps the bridges off the vitest main thread. The supervisor stops its nodes when
 * we send SIGTERM, and by itself when our stdin pipe closes (vitest died).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const KEY = Symbol.for("edge-redlock.test.runtimes.nodes");
const START_TIMEOUT_MS = 30_000;

interface Shared {
  users: number;
  started: Promise<{ child: ChildProcess; nodes: { url: string; token: string }[]; outDir: string }>;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const scope = globalThis as { [KEY]?: Shared };
  scope[KEY] ??= { users: 0, started: start() };
  const shared = scope[KEY];
  shared.users++;
  const { nodes } = await shared.started;
  project.provide("nodes", nodes);
  return async () => {
    if (--shared.users > 0) return;
    delete scope[KEY];
    const { child, outDir } = await shared.started;
    await stop(child);
    rmSync(outDir, { recursive: true, force: true });
  };
}

async function start() {
  const outDir = mkdtempSync(join(tmpdir(), "edge-redlock-runtimes-"));
  const child = spawn(process.execPath, ["--import", "tsx", "tools/nodes/cli.ts", "--nodes", "5", "--out", outDir], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const endpoints = join(outDir, "endpoints.json");
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!existsSync(endpoints)) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      if (child.exitCode === null) await stop(child);
      throw new Error(`the node supervisor did not start (exit ${child.exitCode}):\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  const file = JSON.parse(readFileSync(endpoints, "utf8")) as { nodes: { url: string; token: string }[] };
  return { child, nodes: file.nodes, outDir };
}

/** SIGTERM, then SIGKILL after 15 s; resolves when the supervisor has exited. */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(timer);
}
