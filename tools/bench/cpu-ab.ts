/**
 * Client CPU of this checkout against another revision's, in one process:
 * `npm run bench:cpu-ab -- --against <rev> [--entry index|core/index] [--rounds 15] [--runs 3000]`.
 *
 * The CPU part (parts/cpu.ts) runs each system in a process of its own, and on this kind of shared
 * machine a process's speed drifts: the same build measured 15 µs per acquire + release in one
 * process and 25 µs in the next, minutes apart. A change of a few percent is lost in that. Here
 * both builds are loaded in one process, each with its own in-memory nodes, and take turns round
 * by round: the ratio of a round to its neighbour of the other build is what a change moved.
 * The nodes know each build's scripts by their SHA-1 but run them as this checkout's
 * memory-store.ts implements each name: a revision whose script of a name answered otherwise
 * is measured on today's answers.
 * @module
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type * as Library from "../../src/index.js";
import { MemoryStore, memoryRedisNode } from "./memory-store.js";
import { bundleLibrary, SRC_DIR } from "./parts/cpu.js";
import { fmt, median } from "./stats.js";

const { values } = parseArgs({
  options: {
    against: { type: "string" },
    entry: { type: "string", default: "index" },
    rounds: { type: "string", default: "15" },
    runs: { type: "string", default: "3000" },
  },
});
const rounds = Number(values.rounds);
const runs = Number(values.runs);
if (
  !values.against ||
  (values.entry !== "index" && values.entry !== "core/index") ||
  !Number.isInteger(rounds) ||
  rounds < 1 ||
  !Number.isInteger(runs) ||
  runs < 1
) {
  throw new Error(
    "usage: npm run bench:cpu-ab -- --against <rev> [--entry index|core/index] [--rounds R ≥ 1] [--runs N ≥ 1]",
  );
}
const entry = values.entry;
const repository = join(SRC_DIR, "..");
const N = 5;

interface Build {
  label: string;
  redlock: Library.Redlock;
  microseconds: number[];
}

async function load(label: string, bundle: string, srcDir: string): Promise<Build> {
  const library = (await import(pathToFileURL(bundle).href)) as typeof Library;
  const stores = await Promise.all(Array.from({ length: N }, () => MemoryStore.create(srcDir)));
  const redlock = new library.Redlock({ nodes: stores.map((store, i) => memoryRedisNode(store, `memory-${i}`)) });
  return { label, redlock, microseconds: [] };
}

let serial = 0;
async function pairs(build: Build, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const lock = await build.redlock.acquire(`cpu:${serial++}`, 10_000);
    await lock.release();
  }
}

const dir = mkdtempSync(join(tmpdir(), "edge-redlock-cpu-ab-"));
try {
  // The other revision's src/ as it was committed, bundled as this checkout's is. The revision is
  // resolved to a commit first (after --end-of-options, so that "--output=…" is a name, not an
  // option), and no shell sees it.
  const git = (args: string[]) => execFileSync("git", args, { cwd: repository, encoding: "utf8", stdio: "pipe" });
  let commit: string;
  try {
    commit = git(["rev-parse", "--verify", "--end-of-options", `${values.against}^{commit}`]).trim();
  } catch {
    throw new Error(`bench:cpu-ab: ${JSON.stringify(values.against)} names no commit of this repository`);
  }
  const theirs = join(dir, "against");
  mkdirSync(theirs);
  git(["archive", "--format=tar", `--output=${join(dir, "against.tar")}`, commit, "src"]);
  execFileSync("tar", ["-x", "-f", join(dir, "against.tar"), "-C", theirs]);
  const builds = [
    await load("this checkout", await bundleLibrary(dir, entry, SRC_DIR, "ours"), SRC_DIR),
    await load(values.against, await bundleLibrary(dir, entry, join(theirs, "src/"), "theirs"), join(theirs, "src/")),
  ];
  for (const build of builds) await pairs(build, 2000);
  for (let round = 0; round < rounds; round++) {
    // Which build goes first alternates: neither always runs right after the other's garbage.
    for (const build of round % 2 === 0 ? builds : [...builds].reverse()) {
      const start = process.cpuUsage();
      await pairs(build, runs);
      const used = process.cpuUsage(start);
      build.microseconds.push((used.user + used.system) / runs);
    }
  }
  const [ours, against] = builds as [Build, Build];
  const ratios = ours.microseconds.map((value, i) => value / (against.microseconds[i] as number));
  console.log(`client CPU per acquire + release, N = ${N}, ${entry}, ${rounds} rounds of ${runs} each, one process`);
  for (const build of builds) {
    console.log(
      `  ${build.label.padEnd(16)} median ${fmt(median(build.microseconds), 1)} µs, min ${fmt(Math.min(...build.microseconds), 1)}`,
    );
  }
  const sorted = [...ratios].sort((a, b) => a - b);
  const quartile = (q: number) => sorted[Math.floor(q * (sorted.length - 1))] as number;
  console.log(
    `  this checkout ÷ ${values.against}, round by round: median ${fmt(median(ratios), 3)} (quartiles ${fmt(quartile(0.25), 3)}–${fmt(quartile(0.75), 3)})`,
  );
  for (const build of builds) await build.redlock.settled();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
