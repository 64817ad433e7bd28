/**
 * The hot-key workload: C clients loop acquire → critical section → release on one key. The
 * critical section is two REST round trips to the data node, and it checks the lock from the
 * outside: `INCR holders` + `GET counter`, then `SET counter+1` + `DECR holders`. A `holders`
 * value above 1 is an overlapping hold; a final counter below the number of completed sections is
 * a lost update. Runs in this process or in worker processes (./hotkey-worker.ts).
 */
import { type RestEndpoint, restPipeline } from "./raw.js";
import { sleep } from "./stats.js";
import { type Backend, createClient, type LockClient, type SystemSpec } from "./systems.js";

/** What a set of hot-key clients needs; serialisable. */
export interface HotKeyConfig {
  spec: SystemSpec;
  backend: Extract<Backend, { kind: "servers" }>;
  data: RestEndpoint;
  clients: number;
  key: string;
  counterKey: string;
  holdersKey: string;
  ttlMs: number;
}

/** One client's figures. */
export interface ClientResult {
  /** Critical sections completed (released) inside the window. */
  handoffs: number;
  /** Critical sections completed at all, inside the window or while draining. */
  sections: number;
  /** Milliseconds from wanting the lock to holding it, for each handoff in the window. */
  waits: number[];
  /** Acquire attempts made by the end of the window. */
  attempts: number;
  /** acquire() calls that gave up (the system's retries ran out) inside the window. */
  gaveUp: number;
  /** Unexpected errors. */
  errors: number;
  /** Sections that found another holder inside (holders > 1). */
  overlaps: number;
  firstError?: string;
}

/** Created clients, ready to run. */
export interface PreparedClients {
  /**
   * Starts every client's loop. `results` are live (they fill in as the loops run); `done`
   * resolves when every loop has ended (after the window, once in-flight acquires give up).
   */
  start(startAt: number, windowMs: number): { results: ClientResult[]; done: Promise<void> };
  close(): Promise<void>;
}

/**
 * Creates the clients and warms each one up (connections, script caches, JIT) with an acquire +
 * release of a key of its own and one data-node round trip, so the window measures steady state.
 */
export async function prepareClients(config: HotKeyConfig): Promise<PreparedClients> {
  const clients: LockClient[] = [];
  for (let i = 0; i < config.clients; i++) clients.push(await createClient(config.spec, config.backend));
  await Promise.all(
    clients.map(async (client, i) => {
      for (let round = 0; round < 1; round++) {
        const handle = await client.acquire(`${config.key}:warm:${process.pid}:${i}`, config.ttlMs);
        if (handle !== null) await client.release(handle);
      }
      await restPipeline(config.data, [["GET", `${config.key}:warm`]]);
    }),
  );
  return {
    start(startAt, windowMs) {
      const results = clients.map(() => emptyResult());
      const done = Promise.all(clients.map((client, i) => loop(client, config, startAt, windowMs, results[i]!)));
      return { results, done: done.then(() => undefined) };
    },
    close: async () => {
      await Promise.all(clients.map((c) => c.close()));
    },
  };
}

function emptyResult(): ClientResult {
  return { handoffs: 0, sections: 0, waits: [], attempts: 0, gaveUp: 0, errors: 0, overlaps: 0 };
}

async function loop(
  client: LockClient,
  config: HotKeyConfig,
  startAt: number,
  windowMs: number,
  result: ClientResult,
): Promise<void> {
  const end = startAt + windowMs;
  await sleep(Math.max(0, startAt - Date.now()));
  const attemptsAtStart = client.attempts();
  const snapshot = setTimeout(
    () => {
      result.attempts = client.attempts() - attemptsAtStart;
    },
    Math.max(0, end - Date.now()),
  );
  while (Date.now() < end) {
    const wantSince = performance.now();
    let handle: unknown = null;
    while (handle === null && Date.now() < end) {
      try {
        handle = await client.acquire(config.key, config.ttlMs);
        if (handle === null && Date.now() < end) result.gaveUp++;
      } catch (error) {
        result.errors++;
        result.firstError ??= (error as Error).message;
        await sleep(10);
      }
    }
    if (handle === null) break;
    const waited = performance.now() - wantSince;
    try {
      const [holders, value] = await restPipeline(config.data, [
        ["INCR", config.holdersKey],
        ["GET", config.counterKey],
      ]);
      if (holders !== 1) result.overlaps++;
      await restPipeline(config.data, [
        ["SET", config.counterKey, Number(value ?? 0) + 1],
        ["DECR", config.holdersKey],
      ]);
      result.sections++;
    } catch (error) {
      result.errors++;
      result.firstError ??= (error as Error).message;
    }
    try {
      await client.release(handle);
    } catch (error) {
      result.errors++;
      result.firstError ??= (error as Error).message;
    }
    if (Date.now() <= end) {
      result.handoffs++;
      result.waits.push(waited);
    }
  }
  clearTimeout(snapshot);
  if (Date.now() <= end) result.attempts = client.attempts() - attemptsAtStart;
}
