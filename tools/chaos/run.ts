/**
 * Runs a set of scenarios with one seed, shares the client builds between them, and writes the
 * outputs: `<scenario>.history.jsonl`, `<scenario>.svg`, and `report.json`.
 * @module
 */

import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { type BuildVariant, buildClient, type ClientBuild } from "./build.js";
import { createForkPool } from "./clients.js";
import { runScenario, type ScenarioResult, startSharedNodes } from "./harness.js";
import { toJsonLines } from "./history.js";
import { type RunReport, summarize } from "./report.js";
import type { Scenario } from "./scenarios.js";
import { timelineSvg } from "./svg.js";

/** Options of {@link runScenarios}. */
export interface RunScenariosOptions {
  readonly seed: number;
  /** Workload time of each random scenario, ms. */
  readonly durationMs: number;
  /** Client processes per random scenario. */
  readonly processes: number;
  /** Concurrent lock workers per random scenario. */
  readonly clients: number;
  /** Output directory (created); nothing is written when omitted. */
  readonly out?: string | undefined;
  readonly command?: string;
  readonly log?: (line: string) => void;
}

/** Client builds made on first use and shared by the scenarios of a run. */
export interface BuildCache {
  get(variant: BuildVariant): Promise<ClientBuild>;
  /** Removes every build's temporary directory. */
  dispose(): Promise<void>;
}

/** Creates a {@link BuildCache}. */
export function createBuildCache(): BuildCache {
  const builds = new Map<BuildVariant, Promise<ClientBuild>>();
  return {
    get(variant) {
      let build = builds.get(variant);
      if (!build) {
        build = buildClient(variant);
        builds.set(variant, build);
      }
      return build;
    },
    async dispose() {
      for (const build of builds.values()) (await build.catch(() => undefined))?.dispose();
      builds.clear();
    },
  };
}

/** Runs the scenarios one after another. */
export async function runScenarios(
  scenarios: readonly Scenario[],
  options: RunScenariosOptions,
): Promise<{ results: ScenarioResult[]; report: RunReport }> {
  const builds = createBuildCache();
  const started = Date.now();
  const results: ScenarioResult[] = [];
  const shared = await startSharedNodes();
  const forks = createForkPool(Math.max(3, options.processes));
  try {
    for (const scenario of scenarios) {
      options.log?.(`${scenario.name} …`);
      const result = await runScenario(scenario, {
        seed: options.seed,
        durationMs: options.durationMs,
        processes: options.processes,
        clients: options.clients,
        builds: (variant) => builds.get(variant),
        shared,
        forks,
        ...(options.log ? { log: options.log } : {}),
      });
      results.push(result);
      if (options.out) {
        mkdirSync(options.out, { recursive: true });
        writeFileSync(join(options.out, `${scenario.name}.history.jsonl`), toJsonLines(result.history));
        writeFileSync(join(options.out, `${scenario.name}.svg`), timelineSvg(result));
      }
      options.log?.(
        `${scenario.name}: ${result.verdict.pass ? "ok" : `FAIL (${result.verdict.reasons.join("; ")})`} in ${Math.round(result.durationMs)} ms`,
      );
    }
  } finally {
    forks.dispose();
    await builds.dispose();
    await shared.stop();
  }
  const report: RunReport = {
    command: options.command ?? "",
    seed: options.seed,
    durationMs: Date.now() - started,
    machine: machine(),
    startedAt: new Date(started).toISOString(),
    scenarios: results.map(summarize),
    pass: results.every((r) => r.verdict.pass),
  };
  if (options.out) writeFileSync(join(options.out, "report.json"), `${JSON.stringify(report, null, 2)}\n`);
  return { results, report };
}

function machine(): RunReport["machine"] {
  let redis = "unknown";
  try {
    redis = execFileSync("redis-server", ["--version"], { encoding: "utf8" }).trim().split(" ")[2] ?? redis;
  } catch {
    // not on PATH: tools/nodes found it elsewhere
  }
  const cpu = cpus();
  return { cpus: cpu.length, cpuModel: cpu[0]?.model ?? "unknown", node: process.version, redis };
}
