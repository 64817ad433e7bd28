/**
 * Forking the benchmark's TypeScript child processes (node host, client workers) with tsx, an
 * IPC channel, and a guarantee that they are killed when this process exits.
 */
import { type ChildProcess, fork } from "node:child_process";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const require = createRequire(import.meta.url);
/** tsx's ESM loader, by absolute URL so the child finds it whatever its working directory. */
const TSX_LOADER = pathToFileURL(require.resolve("tsx")).href;

const children = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
});

/** Forks `modulePath` (a .ts file) under tsx with an IPC channel; output goes to ours. */
export function forkTs(modulePath: string, args: string[] = []): ChildProcess {
  const child = fork(modulePath, args, {
    execArgv: ["--import", TSX_LOADER],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

/** Forks `modulePath` (plain JavaScript, e.g. a bundle) with an IPC channel; output goes to ours. */
export function forkJs(modulePath: string, args: string[] = []): ChildProcess {
  const child = fork(modulePath, args, { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

/** Resolves when the child has exited (at once if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}
