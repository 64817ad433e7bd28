import { readFileSync } from "node:fs";

/**
 * Whether a process with this PID exists and has not exited.
 *
 * `kill(pid, 0)` alone is not enough: a child re-parented to a PID 1 that does not reap (common
 * in containers) stays a zombie, which `kill(pid, 0)` still reports as existing. On Linux the
 * state letter in /proc/<pid>/stat tells zombies (Z) and dead tasks (X) apart.
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  if (process.platform !== "linux") return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Format: "pid (comm) S ..."; comm may contain spaces and parentheses, so cut at the last ")".
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false; // vanished between the two checks
  }
}

/** Polls until the process is gone; resolves `true` if it went away within `timeoutMs`. */
export async function waitForProcessExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isProcessAlive(pid)) {
    if (Date.now() >= deadline) return false;
    await sleep(20);
  }
  return true;
}

/** Sends a signal, ignoring "no such process". */
export function signalProcess(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
  }
}

/** Promise-based setTimeout. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
