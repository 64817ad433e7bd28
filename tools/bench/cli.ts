/**
 * `npm run bench [-- --parts hotkey,uncontended,… --duration S --rounds R --quick --out DIR --final]`
 *
 * Runs edge-redlock and the libraries users would pick instead side by side against the same
 * local nodes, prints the tables, and writes RESULTS.md and SVG charts to DIR (default bench/).
 * Full mode fits in 10 minutes, --quick in 3. Without --final, RESULTS.md says the figures are
 * provisional.
 */

import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { PARTS, type PartId, runBench } from "./bench.js";

const usage = `usage: npm run bench -- [--parts ${Object.keys(PARTS).join(",")}] [--duration S] [--rounds R] [--hot-rounds R] [--quick] [--smoke] [--out DIR] [--final]\n`;

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
  const outDir = values.out ?? fileURLToPath(new URL("../../bench/", import.meta.url));
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
  });
  process.stdout.write(`\nwrote ${outDir}RESULTS.md in ${((performance.now() - started) / 1000).toFixed(0)} s\n`);
}

main().then(
  () => process.exit(0),
  (error: Error) => {
    process.stderr.write(`${error.stack ?? error.message}\n`);
    process.exit(1);
  },
);
