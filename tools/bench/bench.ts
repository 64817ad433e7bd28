/**
 * The benchmark runner: starts the node host, runs the chosen parts, prints their tables and
 * writes RESULTS.md and the charts. `runBench` is what `npm run bench` (./cli.ts) and the smoke
 * test call.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import type { BenchContext, BenchOptions, PartResult, Table } from "./context.js";
import { startNodeHost } from "./node-host-client.js";
import { bundlePart } from "./parts/bundle.js";
import { cpuPart } from "./parts/cpu.js";
import { hotKeyPart } from "./parts/hotkey.js";
import { geoPart, isolatesPart } from "./parts/isolates.js";
import { floorPart, slowNodePart, uncontendedPart } from "./parts/latency.js";
import { overlapPart } from "./parts/overlap.js";
import { semaphorePart } from "./parts/semaphore.js";
import { subrequestsPart } from "./parts/subrequests.js";
import { type Environment, printPart, writeResults } from "./report.js";
import { preloadScripts } from "./scripts.js";
import { SYSTEMS } from "./systems.js";

export const PARTS = {
  floor: floorPart,
  uncontended: uncontendedPart,
  "slow-node": slowNodePart,
  hotkey: hotKeyPart,
  isolates: isolatesPart,
  geo: geoPart,
  overlap: overlapPart,
  cpu: cpuPart,
  bundle: bundlePart,
  subrequests: subrequestsPart,
  semaphore: semaphorePart,
} as const;

export type PartId = keyof typeof PARTS;

export interface RunBenchOptions extends BenchOptions {
  parts: PartId[];
  /** Where RESULTS.md and the charts go; nothing is written when undefined. */
  outDir?: string;
  /** The command line, for the results. */
  command: string;
  /** Print tables as parts finish. */
  print: boolean;
  /** Mark the figures as provisional in RESULTS.md. */
  provisional: boolean;
  log?: (message: string) => void;
}

/** The installed version of a package, read from node_modules (some packages do not export package.json). */
function version(pkg: string): string {
  const path = fileURLToPath(new URL(`../../node_modules/${pkg}/package.json`, import.meta.url));
  return (JSON.parse(readFileSync(path, "utf8")) as { version: string }).version.replace(/^v/, "");
}

function environment(options: RunBenchOptions): Environment {
  let redis = "unknown";
  try {
    redis = execFileSync("redis-server", ["--version"], { encoding: "utf8" }).trim();
  } catch {
    // reported as unknown
  }
  const model = cpus()[0]?.model ?? "unknown CPU";
  return {
    date: new Date().toISOString(),
    command: options.command,
    machine: `${cpus().length} CPUs (${model}), ${process.platform} ${process.arch}`,
    node: process.version,
    redis,
    peers: [
      "@upstash/lock",
      "@upstash/redis",
      "@sesamecare-oss/redlock",
      "redlock-universal",
      "ioredis",
      "redis-semaphore",
    ].map((p) => `${p} ${version(p)}`),
    mode: options.smoke ? "smoke" : options.quick ? "quick" : "full",
    load: `at the start: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(", ")}`,
  };
}

function systemsTable(): Table {
  return {
    title: "Systems under test",
    columns: ["system", "version", "transport", "defaults", "equal retry policy"],
    rows: Object.values(SYSTEMS).map((s) => [s.label, s.version, s.transport, s.defaults, s.equal]),
  };
}

/** What a run produced. */
export interface BenchRun {
  parts: PartResult[];
  /** PIDs of every process the run started for its nodes (node host and redis-servers), all stopped by now. */
  nodePids: number[];
}

/** Runs the parts in order against one node host (7 lock nodes + a data node); always stops it. */
export async function runBench(options: RunBenchOptions): Promise<BenchRun> {
  const log = options.log ?? ((message: string) => process.stderr.write(`${message}\n`));
  const started = performance.now();
  const env = environment(options);
  const host = await startNodeHost(options.smoke ? 3 : 7);
  const results: PartResult[] = [];
  try {
    await preloadScripts(host.nodes);
    const stamp = `${env.date.slice(0, 10)}, ${env.machine}, Node ${env.node}, ${env.mode} mode${options.provisional ? ", provisional" : ""} (see RESULTS.md)`;
    const ctx: BenchContext = { host, options, log, stamp };
    for (const id of options.parts) {
      log(`part ${id}…`);
      const t = performance.now();
      const part = await PARTS[id](ctx);
      part.seconds = (performance.now() - t) / 1000;
      log(`part ${id} done in ${part.seconds.toFixed(1)} s`);
      results.push(part);
      if (options.print) printPart(part);
    }
  } finally {
    await host.stop();
  }
  env.seconds = (performance.now() - started) / 1000;
  env.load = `${env.load}; at the end: ${loadavg()
    .map((l) => l.toFixed(1))
    .join(", ")}`;
  if (options.outDir) writeResults(options.outDir, env, results, systemsTable(), options.provisional);
  return { parts: results, nodePids: [host.hostPid, ...host.pids] };
}
