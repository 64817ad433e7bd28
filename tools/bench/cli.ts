/**
 * `npm run bench [-- --parts hotkey,uncontended,… --duration S --rounds R --quick --out DIR --final]`
 *
 * Runs edge-redlock and the libraries users would pick instead side by side against the same
 * local nodes, prints the tables, and writes RESULTS.md and SVG charts to DIR: by default bench/
 * for a run of every part (or --final), a fresh temporary folder for a run of some parts (--parts):
 * the tracked files describe one whole run, and a partial one replaced them with its own tables.
 * Without --final, RESULTS.md says the figures are provisional. The isolates parts ("isolates",
 * "geo") take --isolates P,P (client processes), --callers C,C (callers per process), --systems
 * (ids or id:policy), --isolate-rounds R (at least 3); with --final their windows are 30 s.
 */

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { PARTS, type PartId, runBench } from "./bench.js";

const usage = `usage: npm run bench -- [--parts ${Object.keys(PARTS).join(",")}] [--duration S] [--rounds R] [--hot-rounds R] [--quick] [--smoke] [--out DIR] [--final] [--isolates 8,16] [--callers 1,4] [--systems id[:policy],…] [--isolate-rounds R]\n`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      parts: { type: "string" },
      duration: { type: "string" },
      rounds: { type: "string" },
      "hot-rounds": { type: "string" },
      quick: { type: "boolean", default: false },
      smoke: { type: "boolean", default: false },
      out: { type: "string" },
      final: { type: "boolean", default: false },
      isolates: { type: "string" },
      callers: { type: "string" },
      systems: { type: "string" },
      "isolate-rounds": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  const parts = (values.parts ?? Object.keys(PARTS).join(",")).split(",").map((p) => p.trim()) as PartId[];
  for (const part of parts) if (!(part in PARTS)) throw new Error(`unknown part ${part}\n${usage}`);
  const quick = values.quick;
  const durationS = Number(values.duration ?? (quick ? 1.5 : 3));
  const rounds = Number(values.rounds ?? (quick ? 3 : 4));
  const hotRounds = Number(values["hot-rounds"] ?? 1);
  if (!Number.isInteger(hotRounds) || hotRounds < 1) throw new Error(`bad --hot-rounds\n${usage}`);
  if (!(durationS > 0) || !Number.isInteger(rounds) || rounds < 1)
    throw new Error(`bad --duration or --rounds\n${usage}`);
  const list = (value: string | undefined) =>
    value
      ?.split(",")
      .map((v) => v.trim())
      .filter((v) => v.length > 0);
  const counts = (value: string | undefined, name: string) => {
    const items = list(value)?.map(Number);
    if (items?.some((v) => !Number.isInteger(v) || v < 1)) throw new Error(`bad --${name}\n${usage}`);
    return items;
  };
  const isolates = counts(values.isolates, "isolates");
  const callers = counts(values.callers, "callers");
  const isolateRounds = values["isolate-rounds"] === undefined ? undefined : Number(values["isolate-rounds"]);
  const systems = list(values.systems);
  const whole = values.parts === undefined || values.final === true;
  const outDir =
    values.out ??
    (whole
      ? fileURLToPath(new URL("../../bench/", import.meta.url))
      : mkdtempSync(join(tmpdir(), "edge-redlock-bench-")));
  const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`;
  const started = performance.now();
  await runBench({
    parts,
    quick,
    smoke: values.smoke,
    durationS,
    hotRounds,
    rounds,
    outDir,
    command,
    print: true,
    provisional: !values.final,
    final: values.final,
    ...(isolates ? { isolates } : {}),
    ...(callers ? { callers } : {}),
    ...(systems ? { systems } : {}),
    ...(isolateRounds === undefined ? {} : { isolateRounds }),
  });
  process.stdout.write(
    `\nwrote ${join(outDir, "RESULTS.md")} in ${((performance.now() - started) / 1000).toFixed(0)} s\n`,
  );
}

main().then(
  () => process.exit(0),
  (error: Error) => {
    process.stderr.write(`${error.stack ?? error.message}\n`);
    process.exit(1);
  },
);
