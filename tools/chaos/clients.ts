/**
 * The client processes of a run, seen from the harness: start, clock handshake, random or driven
 * workload, and the process-level faults (SIGSTOP/SIGCONT, event-loop stalls, SIGKILL).
 * @module
 */
import { type ChildProcess, fork } from "node:child_process";
import { findExecutable } from "../nodes/ensure-redis.js";
import { harnessNow } from "./clock.js";
import type { HistoryEvent } from "./history.js";
import type { ClientConfig, DrivenOp, FromClient, StaleToken, ToClient } from "./protocol.js";

/** One client process. */
export interface ClientProcess {
  readonly id: string;
  readonly pid: number;
  /** A resource one of its workers holds right now, as last reported (null: none). */
  holding(): string | null;
  /** Whether it is alive (not killed, not exited). */
  alive(): boolean;
  /** Starts the random workload until the harness time `untilMs`. */
  run(untilMs: number): void;
  /** Runs one driven operation (by worker `op.worker`, default 0); resolves with its outcome. */
  perform(op: DrivenOp, timeoutMs?: number): Promise<{ ok: boolean; detail?: string }>;
  /** Hands it a token another worker released, to misuse by token (see `Misuse.staleToken`). */
  stale(stale: StaleToken): void;
  pause(): void;
  resume(): void;
  /** Blocks its event loop for `ms`. */
  stall(ms: number): void;
  /** SIGKILLs it (the holder dies). */
  kill(): Promise<void>;
  /** Asks it to finish (release, settle) and waits; SIGKILLs it after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/** A client process that is loading; `init` configures it. */
export interface ForkedClient {
  readonly pid: number;
  /**
   * Sends the configuration, waits until ready, and measures its clock offset; its events go to
   * `emit`, the tokens its workers share after a release to `onToken` (they never enter the history).
   */
  init(
    config: ClientConfig,
    emit: (event: HistoryEvent) => void,
    onToken?: (stale: StaleToken) => void,
  ): Promise<ClientProcess>;
  /** SIGKILLs it (when the run fails before `init`). */
  kill(): void;
}

const setpriv = process.platform === "linux" ? findExecutable("setpriv") : undefined;

/** Pings of a clock handshake at least, and at most. */
const HANDSHAKE_MIN_PINGS = 5;
const HANDSHAKE_MAX_PINGS = 40;
/** A handshake's bound (half its best ping's round trip) good enough to stop at, ms. */
const HANDSHAKE_GOOD_MS = 0.5;

/**
 * Forks a client process. Loading the bundle takes most of a client's start-up, so the harness
 * forks clients while the nodes start, and initialises them once the nodes are known.
 */
export function forkClient(bundle: string): ForkedClient {
  // On Linux the kernel SIGKILLs the client when the harness dies, even while it is SIGSTOPped
  // (a stopped process would never see the IPC channel close).
  const child: ChildProcess = fork(bundle, [], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    serialization: "json",
    // The bundle is plain CommonJS: none of the harness's own flags (such as a TypeScript loader).
    ...(setpriv
      ? { execPath: setpriv, execArgv: ["--pdeathsig", "SIGKILL", "--", process.execPath] }
      : { execArgv: [] }),
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error("could not fork a client process");
  const exitedEarly = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    pid,
    kill: () => {
      child.kill("SIGKILL");
    },
    init: (config, emit, onToken) => initClient(child, pid, exitedEarly, config, emit, onToken),
  };
}

/** Client processes forked ahead of time, so a scenario does not wait for them to load. */
export interface ForkPool {
  /** A forked client of this bundle: a warm one if there is one; a replacement is forked in the background. */
  take(bundle: string): ForkedClient;
  /** PIDs of the warm clients not taken yet. */
  pids(): number[];
  /** Kills the warm clients. */
  dispose(): void;
}

/** Keeps `size` clients of each bundle used so far loaded and waiting. */
export function createForkPool(size: number): ForkPool {
  const warm = new Map<string, ForkedClient[]>();
  let disposed = false;
  return {
    take(bundle) {
      const list = warm.get(bundle) ?? [];
      warm.set(bundle, list);
      const taken = list.shift() ?? forkClient(bundle);
      while (!disposed && list.length < size) list.push(forkClient(bundle));
      return taken;
    },
    pids: () => [...warm.values()].flat().map((f) => f.pid),
    dispose() {
      disposed = true;
      for (const f of [...warm.values()].flat()) f.kill();
      warm.clear();
    },
  };
}

async function initClient(
  child: ChildProcess,
  pid: number,
  exitedEarly: Promise<void>,
  config: ClientConfig,
  emit: (event: HistoryEvent) => void,
  onToken: (stale: StaleToken) => void = () => {},
): Promise<ClientProcess> {
  const holding = new Map<string, string>();
  let exited = child.exitCode !== null || child.signalCode !== null;
  const exit = exitedEarly.then(() => {
    exited = true;
  });
  const waiting = new Map<number, (message: FromClient) => void>();
  let nextId = 1;
  let onReady: (() => void) | undefined;
  let onStopped: (() => void) | undefined;

  child.on("message", (message: FromClient) => {
    switch (message.type) {
      case "event":
        emit(message.event);
        break;
      case "holding":
        if (message.resource === null) holding.delete(message.worker);
        else holding.set(message.worker, message.resource);
        break;
      case "ready":
        onReady?.();
        break;
      case "stopped":
        onStopped?.();
        break;
      case "token":
        onToken(message.stale);
        break;
      case "pong":
      case "done":
        waiting.get(message.id)?.(message);
        waiting.delete(message.id);
        break;
    }
  });
  // A client can die before its exit event arrives; a write to its closed channel then fails with
  // EPIPE. The message is moot (the death shows as the exit), so the callback drops the error,
  // which send() would otherwise emit on the child with no listener: an uncaught exception.
  const post = (message: ToClient) => {
    if (!exited && child.connected) child.send(message, undefined, undefined, () => {});
  };
  const request = (build: (id: number) => ToClient, timeoutMs: number) =>
    new Promise<FromClient | undefined>((resolve) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        resolve(undefined);
      }, timeoutMs);
      waiting.set(id, (m) => {
        clearTimeout(timer);
        resolve(m);
      });
      post(build(id));
    });

  await new Promise<void>((resolve, reject) => {
    onReady = resolve;
    void exit.then(() => reject(new Error(`client ${config.id} exited before it was ready`)));
    post({ type: "init", config });
  });

  // Clock handshake: the client's harness clock against ours, to bound cross-process error. The
  // bound is half the best ping's round trip; on a loaded machine the first pings can all take
  // several ms (a bound of 7.85 ms in a CI run), so it goes on until one is quick, within a limit.
  let best: { offsetMs: number; uncertaintyMs: number } | undefined;
  for (let i = 0; i < HANDSHAKE_MAX_PINGS; i++) {
    if (i >= HANDSHAKE_MIN_PINGS && best !== undefined && best.uncertaintyMs <= HANDSHAKE_GOOD_MS) break;
    const sentAt = harnessNow();
    const pong = await request((id) => ({ type: "ping", id }), 2_000);
    const receivedAt = harnessNow();
    if (pong?.type !== "pong") continue;
    const estimate = { offsetMs: pong.t - (sentAt + receivedAt) / 2, uncertaintyMs: (receivedAt - sentAt) / 2 };
    if (!best || estimate.uncertaintyMs < best.uncertaintyMs) best = estimate;
  }
  emit({ t: harnessNow(), process: "harness", type: "info", f: "clock-offset", data: { client: config.id, ...best } });

  const signal = (sig: NodeJS.Signals) => {
    if (exited) return;
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  };

  return {
    id: config.id,
    pid,
    holding: () => holding.values().next().value ?? null,
    alive: () => !exited,
    run: (untilMs) => post({ type: "run", untilMs }),
    async perform(op, timeoutMs = 30_000) {
      const done = await request((id) => ({ type: "do", id, op }), timeoutMs);
      if (done?.type !== "done") return { ok: false, detail: "no answer" };
      return done.detail === undefined ? { ok: done.ok } : { ok: done.ok, detail: done.detail };
    },
    stale: (stale) => post({ type: "stale", stale }),
    pause: () => signal("SIGSTOP"),
    resume: () => signal("SIGCONT"),
    stall: (ms) => post({ type: "stall", ms }),
    async kill() {
      signal("SIGKILL");
      await exit;
    },
    async stop(graceMs = 10_000) {
      if (exited) return;
      signal("SIGCONT");
      const stopped = new Promise<void>((resolve) => {
        onStopped = resolve;
      });
      post({ type: "stop" });
      const timer = setTimeout(() => signal("SIGKILL"), graceMs);
      await Promise.race([stopped.then(() => exit), exit]);
      clearTimeout(timer);
    },
  };
}
