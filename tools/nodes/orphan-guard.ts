import { type ChildProcess, spawn } from "node:child_process";
import { findExecutable } from "./ensure-redis.js";

/**
 * How redis-server children are made to die with the supervisor, even when it is SIGKILLed:
 * - "pdeathsig": spawn through `setpriv --pdeathsig SIGKILL` (Linux, util-linux): the kernel kills
 *   the child when its parent dies. No extra process.
 * - "watchdog": a small detached Node process holds a pipe from the supervisor; when the pipe
 *   closes (the supervisor died, however), it SIGKILLs the PIDs it was told about and removes the
 *   data directory. Works wherever Node runs; the fallback when setpriv is missing.
 * - "auto": "pdeathsig" when available, else "watchdog".
 */
export type OrphanGuardMode = "auto" | "pdeathsig" | "watchdog";

/** Makes spawned children die with the current process. */
export interface OrphanGuard {
  /** The strategy actually in use. */
  readonly mode: "pdeathsig" | "watchdog";
  /** The command line to spawn instead of `command args…`. */
  wrap(command: string, args: string[]): { command: string; args: string[] };
  /** Registers a spawned child PID to kill if the supervisor dies. */
  track(pid: number): void;
  /** Forgets a PID (it exited, or was stopped on purpose). */
  untrack(pid: number): void;
  /** Releases the guard after a clean shutdown (nothing is killed). */
  close(): void;
}

/**
 * Creates an orphan guard.
 *
 * @param mode - see {@link OrphanGuardMode}.
 * @param cleanupDir - directory the watchdog removes after killing the children.
 */
export function createOrphanGuard(mode: OrphanGuardMode, cleanupDir: string): OrphanGuard {
  const setpriv = process.platform === "linux" ? findExecutable("setpriv") : undefined;
  if (mode === "pdeathsig" && !setpriv) throw new Error("orphan guard 'pdeathsig' needs setpriv (util-linux) on Linux");
  if (mode !== "watchdog" && setpriv) return pdeathsigGuard(setpriv);
  return watchdogGuard(cleanupDir);
}

function pdeathsigGuard(setpriv: string): OrphanGuard {
  return {
    mode: "pdeathsig",
    // setpriv sets PR_SET_PDEATHSIG and then execs redis-server, so the spawned PID is
    // redis-server itself and the death signal survives the exec.
    wrap: (command, args) => ({
      command: setpriv,
      args: ["--pdeathsig", "SIGKILL", "--", command, ...args],
    }),
    track: () => {},
    untrack: () => {},
    close: () => {},
  };
}

// Runs in the watchdog process (CommonJS via `node -e`). Protocol on stdin, one per line:
// "+<pid>" track, "-<pid>" untrack, "done" clean shutdown (forget everything).
const WATCHDOG_SOURCE = `
const fs = require("node:fs");
process.title = "edge-redlock-nodes-watchdog";
const pids = new Set();
let dir = process.argv[1] || "";
let pending = "";
process.on("SIGINT", () => {}); // Ctrl-C in the terminal is the supervisor's business
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  pending += chunk;
  let nl;
  while ((nl = pending.indexOf("\\n")) >= 0) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    if (line === "done") { pids.clear(); dir = ""; }
    else if (line[0] === "+") pids.add(Number(line.slice(1)));
    else if (line[0] === "-") pids.delete(Number(line.slice(1)));
  }
});
process.stdin.on("close", () => {
  for (const pid of pids) { try { process.kill(pid, "SIGKILL"); } catch {} }
  if (dir) { try { fs.rmSync(dir, { recursive: true, force: true }); } catch {} }
  process.exit(0);
});
`;

function watchdogGuard(cleanupDir: string): OrphanGuard {
  // detached: its own process group, so a terminal Ctrl-C or a group kill aimed at the supervisor
  // does not take the watchdog down before it has done its job.
  const child: ChildProcess = spawn(process.execPath, ["-e", WATCHDOG_SOURCE, cleanupDir], {
    stdio: ["pipe", "ignore", "ignore"],
    detached: true,
  });
  child.unref();
  child.stdin?.on("error", () => {}); // the watchdog died first: nothing useful to do
  const send = (line: string) => {
    if (child.stdin?.writable) child.stdin.write(`${line}\n`);
  };
  return {
    mode: "watchdog",
    wrap: (command, args) => ({ command, args }),
    track: (pid) => send(`+${pid}`),
    untrack: (pid) => send(`-${pid}`),
    close: () => {
      send("done");
      child.stdin?.end();
    },
  };
}
