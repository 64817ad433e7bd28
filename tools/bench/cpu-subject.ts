/**
 * One subject of the client-CPU part (./parts/cpu.ts) in a process of its own: it builds its
 * client over instant in-memory nodes, warms it up, and on each "round" runs sequential
 * acquire + release pairs and reports the CPU this process used for them.
 *
 * A process per subject, because a user's process runs one lock library: measured side by side in
 * one process, a subject's rounds also paid for the garbage and the timers the subject before it
 * left behind (rounds of the same subject ranged over 2×).
 */
import { pathToFileURL } from "node:url";
import type * as Library from "../../src/index.js";
import type { CpuReply, CpuRequest, CpuSubjectKind } from "./cpu-protocol.js";
import { MemoryStore, memoryFetch, memoryRedisNode } from "./memory-store.js";
import { createClient, type LockClient } from "./systems.js";

let client: LockClient | undefined;
let serial = 0;
/** HTTP requests sent through the in-memory fetch (the REST subjects'; 0 for RedisNode and TCP ones). */
let requests = 0;

function reply(message: CpuReply, exitCode?: number): void {
  process.send?.(message, () => {
    if (exitCode !== undefined) process.exit(exitCode);
  });
}

async function once(subject: LockClient): Promise<void> {
  const handle = await subject.acquire(`cpu:${serial++}`, 10_000);
  if (handle === null) throw new Error("did not acquire in memory");
  await subject.release(handle);
}

async function prepare(kind: CpuSubjectKind, n: number, libraryPath: string, warmUp: number): Promise<void> {
  const stores = await Promise.all(Array.from({ length: n }, () => MemoryStore.create()));
  const answer = memoryFetch(stores, globalThis.fetch);
  globalThis.fetch = (input, init) => {
    requests++;
    return answer(input, init);
  };
  if (kind === "edge-redlock:memory" || kind === "edge-redlock:rest" || kind === "edge-redlock-core:memory") {
    // `libraryPath`: the bundle of the entry the subject measures (the default or edge-redlock/core).
    const library = (await import(pathToFileURL(libraryPath).href)) as typeof Library;
    client = edgeRedlockClient(
      library,
      kind !== "edge-redlock:rest"
        ? stores.map((store, i) => memoryRedisNode(store, `memory-${i}`))
        : stores.map((_, i) => ({ url: `http://memory-${i}`, token: "memory" })),
    );
  } else {
    client = await createClient({ id: kind, policy: "defaults", n }, { kind: "memory", stores });
  }
  for (let i = 0; i < warmUp; i++) await once(client);
  reply({ type: "ready" });
}

async function round(runs: number): Promise<void> {
  if (!client) throw new Error("round before prepare");
  const sentBefore = requests;
  const start = process.cpuUsage();
  for (let i = 0; i < runs; i++) await once(client);
  const used = process.cpuUsage(start);
  reply({ type: "round", microseconds: (used.user + used.system) / runs, requests: (requests - sentBefore) / runs });
}

/** An edge-redlock client of the bundled library, with its default options. */
function edgeRedlockClient(library: typeof Library, nodes: Library.NodeConfig[]): LockClient {
  // A node error would mean the in-memory nodes answer a script differently than the library
  // expects (memory-store.ts lagging behind the scripts/ folders of src/): the figure would measure error paths.
  let nodeErrors = 0;
  let firstError: unknown;
  const redlock = new library.Redlock({
    nodes,
    onNodeError: ({ outcome }) => {
      nodeErrors++;
      firstError ??= outcome.error;
    },
  });
  return {
    acquire: (key, ttl) => redlock.acquire(key, ttl),
    release: async (handle) => {
      await (handle as Library.Lock).release();
    },
    attempts: () => 0,
    close: async () => {
      await redlock.settled();
      if (nodeErrors > 0)
        throw new Error(`edge-redlock met ${nodeErrors} node errors on in-memory nodes`, { cause: firstError });
    },
  };
}

process.on("message", (message: CpuRequest) => {
  const work =
    message.type === "prepare"
      ? prepare(message.kind, message.nodes, message.libraryPath, message.warmUp)
      : message.type === "round"
        ? round(message.runs)
        : (client?.close() ?? Promise.resolve()).then(() => reply({ type: "closed" }, 0));
  work.catch((error: Error) => reply({ type: "failed", error: `${message.type}: ${error.stack ?? error.message}` }, 1));
});
process.on("disconnect", () => process.exit(0));
