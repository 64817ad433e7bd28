/**
 * `npm run chaos -- --seed S --duration D --scenario NAME|all [--clients K] [--processes P] [--out DIR]`
 *
 * Runs the scenarios against real local nodes with faults injected, checks the histories, prints
 * the summary table, and writes the histories, SVG timelines and report.json. Exit code 1 when a
 * safe scenario showed an anomaly or a negative control did not fire.
 * @module
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseOptions } from "./options.js";
import { summaryTable } from "./report.js";
import { runScenarios } from "./run.js";
import { SCENARIOS, scenarioByName } from "./scenarios.js";

/** Workload time of a random scenario when --duration is not given, seconds. */
const DEFAULT_SCENARIO_SECONDS = 3;

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const scenarios = options.scenario === "all" ? SCENARIOS : [scenarioByName(options.scenario)];
  const random = scenarios.filter((s) => !s.driver).length;
  // --duration is the total workload time, shared by the random scenarios.
  const durationMs =
    options.durationS === undefined
      ? DEFAULT_SCENARIO_SECONDS * 1000
      : Math.max(1000, Math.round((options.durationS * 1000) / Math.max(1, random)));
  const out = options.out ?? mkdtempSync(join(tmpdir(), `edge-redlock-chaos-${options.seed}-`));
  const command = `npm run chaos -- ${process.argv.slice(2).join(" ")}`.trim();
  console.log(
    `${command}\nseed ${options.seed}, ${scenarios.length} scenarios, ${durationMs} ms per random scenario, ${options.processes} client processes running ${options.clients} workers; output in ${out}`,
  );
  const { report } = await runScenarios(scenarios, {
    seed: options.seed,
    durationMs,
    processes: options.processes,
    clients: options.clients,
    out,
    command,
    log: (line) => console.log(line),
  });
  console.log(`\n${summaryTable(report.scenarios)}\n`);
  console.log(
    `${report.pass ? "PASS" : "FAIL"}: ${report.scenarios.length} scenarios in ${(report.durationMs / 1000).toFixed(1)} s on ${report.machine.cpus} × ${report.machine.cpuModel}, Node ${report.machine.node}, redis ${report.machine.redis}`,
  );
  console.log(`report: ${join(out, "report.json")}; timelines: ${join(out, "<scenario>.svg")}`);
  process.exitCode = report.pass ? 0 : 1;
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 2;
});
