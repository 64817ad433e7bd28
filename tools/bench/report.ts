/** Printing the results as text tables, and writing bench/RESULTS.md and the SVG charts. */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { PartResult, Table } from "./context.js";

/** The run's circumstances, stated with every figure. */
export interface Environment {
  date: string;
  command: string;
  machine: string;
  node: string;
  redis: string;
  peers: string[];
  mode: string;
  /** Load averages (1, 5, 15 min) at the start and end: how busy the machine was. */
  load: string;
  seconds?: number;
}

/** A table as aligned plain text. */
export function textTable(table: Table): string {
  const widths = table.columns.map((c, i) => Math.max(c.length, ...table.rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  return [table.title, line(table.columns), widths.map((w) => "-".repeat(w)).join("  "), ...table.rows.map(line)].join(
    "\n",
  );
}

function markdownTable(table: Table): string {
  const escapeCell = (cell: string) => cell.replace(/\|/g, "\\|");
  return [
    `**${table.title}**`,
    "",
    `| ${table.columns.map(escapeCell).join(" | ")} |`,
    `|${table.columns.map(() => "---").join("|")}|`,
    ...table.rows.map((row) => `| ${row.map(escapeCell).join(" | ")} |`),
  ].join("\n");
}

/** Prints one part to stdout. */
export function printPart(part: PartResult): void {
  const out: string[] = [`\n== ${part.title} ==`];
  for (const table of part.tables) out.push(textTable(table), "");
  for (const note of part.notes) out.push(`note: ${note}`);
  for (const check of part.checks) out.push(`${check.pass ? "PASS" : "FAIL"}  ${check.target}: ${check.measured}`);
  process.stdout.write(`${out.join("\n")}\n`);
}

/** Writes RESULTS.md and the charts into `dir`. */
export function writeResults(
  dir: string,
  env: Environment,
  parts: PartResult[],
  systemsTable: Table,
  provisional: boolean,
): void {
  mkdirSync(dir, { recursive: true });
  const md: string[] = [
    "# edge-redlock benchmarks",
    "",
    provisional
      ? "> **Provisional figures**: this run was made on a machine shared with other work; the final run will replace them."
      : "",
    "",
    "Produced by `npm run bench` (tools/bench). Every figure below comes from the one run described here; all systems ran against the same nodes, on the same machine, in interleaved order.",
    "",
    "| | |",
    "|---|---|",
    `| date | ${env.date} |`,
    `| command | \`${env.command}\` |`,
    `| mode | ${env.mode} |`,
    `| machine | ${env.machine} |`,
    `| Node.js | ${env.node} |`,
    `| Redis | ${env.redis} |`,
    `| peers | ${env.peers.join(", ")} |`,
    `| load average | ${env.load} |`,
    ...(env.seconds ? [`| run time | ${Math.round(env.seconds)} s |`] : []),
    "",
    "## Setup",
    "",
    "- Nodes: real `redis-server` processes, each behind the Upstash-protocol REST bridge (tools/rest-bridge), all served by a node host process of their own (tools/bench/node-host.ts), never on the event loop of the clients being measured. The hot-key clients run in client processes of their own too.",
    "- Added latency, per node, identical for REST and TCP: the **fixed delay** holds back every **response** (the command runs at once and its answer arrives d ms later: every round trip +d ms); the **jitter** holds back every **request** by a fresh random delay in [0, j) before the command runs, so concurrent clients reach the nodes in varying orders. TCP peers get the same delays through a TCP proxy per node (tools/bench/tcp-proxy.ts): server→client chunks +d ms, client→server chunks + random [0, j), order kept within a connection.",
    "- Requests are counted on the server side, never by the libraries themselves: HTTP requests (and the commands in them) at each bridge, commands at each TCP proxy.",
    "- Everything runs on loopback (127.0.0.1).",
    "",
    "## Systems",
    "",
    markdownTable(systemsTable),
    "",
  ];
  const checks = parts.flatMap((p) => p.checks);
  if (checks.length > 0) {
    md.push("## Targets", "", "| | target | measured |", "|---|---|---|");
    for (const check of checks)
      md.push(`| ${check.pass ? "✅ pass" : "❌ fail"} | ${check.target.replace(/\|/g, "\\|")} | ${check.measured} |`);
    md.push("");
  }
  for (const part of parts) {
    md.push(`## ${part.title}`, "");
    if (part.seconds !== undefined) md.push(`_Part run time: ${Math.round(part.seconds)} s._`, "");
    for (const line of part.method) md.push(`- ${line}`);
    md.push("");
    for (const table of part.tables) md.push(markdownTable(table), "");
    for (const note of part.notes) md.push(`- ${note}`);
    if (part.notes.length > 0) md.push("");
    for (const chart of part.charts) {
      writeFileSync(join(dir, chart.file), chart.svg);
      md.push(`![${chart.title}](${chart.file})`, "");
    }
  }
  writeFileSync(join(dir, "RESULTS.md"), `${md.join("\n").replace(/\n{3,}/g, "\n\n")}\n`);
}
