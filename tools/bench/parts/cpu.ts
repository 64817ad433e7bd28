/** Part 7: client CPU per acquire + release against instant in-memory nodes (no network at all). */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";
import type * as Library from "../../../src/index.js";
import { type BenchContext, emptyPart, type PartResult } from "../context.js";
import { MemoryStore, memoryFetch, memoryRedisNode } from "../memory-store.js";
import { fmt, median } from "../stats.js";
import { createClient, type LockClient, SYSTEMS, type SystemSpec } from "../systems.js";

/**
 * edge-redlock as a user's bundler ships it: src/index.ts bundled by esbuild (no tsx transform,
 * whose keepNames wrappers would cost CPU on every closure).
 */
async function bundledLibrary(): Promise<typeof Library> {
  const dir = mkdtempSync(join(tmpdir(), "edge-redlock-bench-"));
  try {
    const out = join(dir, "edge-redlock.mjs");
    const result = await build({
      entryPoints: [fileURLToPath(new URL("../../../src/index.ts", import.meta.url))],
      bundle: true,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      write: false,
      logLevel: "silent",
    });
    writeFileSync(out, result.outputFiles[0]!.contents);
    return (await import(pathToFileURL(out).href)) as typeof Library;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface CpuSubject {
  label: string;
  client: LockClient;
  what: string;
}

export async function cpuPart(ctx: BenchContext): Promise<PartResult> {
  const part = emptyPart("cpu", "Client CPU per acquire + release");
  const { smoke, quick } = ctx.options;
  const n = 5;
  // Rounds of 1000 runs (30 ms of CPU for the lock alone) ranged from 31 to 237 µs per run on this
  // shared machine: one scheduling hiccup or GC pause decided a round. Rounds of 5000 after a
  // longer warm-up ranged from 25 to 70 µs on the same machine.
  const perRound = smoke ? 50 : quick ? 300 : 5000;
  const rounds = smoke ? 2 : quick ? 3 : 7;
  const warmUp = smoke ? 50 : quick ? 300 : 1000;
  part.method.push(
    `N = ${n} instant in-memory nodes in this process. Process CPU (user + system, process.cpuUsage) over ${perRound} sequential acquire + release runs after ${warmUp} to warm up, ${rounds} interleaved rounds, median of rounds.`,
    "edge-redlock is src/index.ts bundled by esbuild (as an application bundler ships it), measured twice: with RedisNode objects answering from memory (library only), and through its fetch transport (restNode) with a fetch answering from memory (library + JSON over Request/Response).",
    "@upstash/lock runs on @upstash/redis with the same in-memory fetch. The TCP peers run on an ioredis-shaped in-memory object: their figure leaves out ioredis itself (RESP encoding, socket writes).",
  );
  const stores = await Promise.all(Array.from({ length: n }, () => MemoryStore.create()));
  const originalFetch = globalThis.fetch;
  globalThis.fetch = memoryFetch(stores, originalFetch);
  const subjects: CpuSubject[] = [];
  try {
    const memory = { kind: "memory" as const, stores };
    const library = await bundledLibrary();
    subjects.push({
      label: "edge-redlock",
      what: "RedisNode in memory",
      client: edgeRedlockClient(
        library,
        stores.map((store, i) => memoryRedisNode(store, `memory-${i}`)),
      ),
    });
    subjects.push({
      label: "edge-redlock",
      what: "restNode + in-memory fetch",
      client: edgeRedlockClient(
        library,
        stores.map((_, i) => ({ url: `http://memory-${i}`, token: "memory" })),
      ),
    });
    for (const id of ["upstash-lock", "sesame-redlock", "redlock-universal"] as SystemSpec["id"][]) {
      subjects.push({
        label: SYSTEMS[id].label,
        what: id === "upstash-lock" ? "@upstash/redis + in-memory fetch, 1 node" : "ioredis-shaped in-memory client",
        client: await createClient({ id, policy: "defaults", n }, memory),
      });
    }
    const perSubject = subjects.map(() => [] as number[]);
    let serial = 0;
    const once = async (subject: CpuSubject) => {
      const handle = await subject.client.acquire(`cpu:${serial++}`, 10_000);
      if (handle === null) throw new Error(`${subject.label} did not acquire in memory`);
      await subject.client.release(handle);
    };
    for (const subject of subjects) for (let i = 0; i < warmUp; i++) await once(subject);
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < subjects.length; k++) {
        const index = (k + round) % subjects.length;
        const subject = subjects[index]!;
        const start = process.cpuUsage();
        for (let i = 0; i < perRound; i++) await once(subject);
        const used = process.cpuUsage(start);
        perSubject[index]!.push((used.user + used.system) / perRound);
      }
    }
    const table = {
      title: `Client CPU per acquire + release (µs, N = ${n}, in-memory nodes)`,
      columns: ["system", "nodes", "µs CPU (median of rounds)", "min–max of rounds"],
      rows: subjects.map((subject, i) => {
        const values = perSubject[i]!;
        return [
          subject.label,
          subject.what,
          fmt(median(values), 1),
          `${fmt(Math.min(...values), 1)}–${fmt(Math.max(...values), 1)}`,
        ];
      }),
    };
    part.tables.push(table);
    const own = median(perSubject[0]!);
    part.checks.push({
      target: `client CPU ≤ 30 µs per acquire + release (edge-redlock, N = ${n}, in-memory nodes)`,
      measured: `${fmt(own, 1)} µs`,
      pass: own <= 30,
    });
    const peers = perSubject.slice(2).map((values) => median(values));
    const leanest = Math.min(...peers);
    if (own > leanest) {
      part.notes.push(
        `edge-redlock is behind: ${fmt(own, 1)} µs against ${fmt(leanest, 1)} µs for the leanest peer. Per acquire + release it starts 2 fan-outs of ${n} node tasks, each with a deadline timer and a recycled AbortController, and builds an attempt report with a per-node outcome list; the TCP peers' figure also leaves out ioredis, and the fetch transport (second row) costs more than the lock logic itself.`,
      );
    }
  } finally {
    globalThis.fetch = originalFetch;
    for (const subject of subjects) await subject.client.close();
  }
  return part;
}

/** An edge-redlock client of the bundled library, with its default options. */
function edgeRedlockClient(library: typeof Library, nodes: Library.NodeConfig[]): LockClient {
  // A node error would mean the in-memory nodes answer a script differently than the library
  // expects (memory-store.ts lagging behind src/scripts): the figure would measure error paths.
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
