/** Part 7: client CPU per acquire + release against instant in-memory nodes (no network at all). */

import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { type BenchContext, emptyPart, type PartResult } from "../context.js";
import type { CpuReply, CpuRequest, CpuSubjectKind } from "../cpu-protocol.js";
import { exited, forkTs } from "../fork.js";
import { fmt, median } from "../stats.js";
import { SYSTEMS } from "../systems.js";

/** src/ of this checkout, ending in a slash. */
export const SRC_DIR = fileURLToPath(new URL("../../../src/", import.meta.url));

/**
 * edge-redlock as a user's bundler ships it: `entry` (`index` for src/index.ts, or `core/index`
 * for `edge-redlock/core`) of the src/ folder `srcDir` bundled by esbuild (no tsx transform,
 * whose keepNames wrappers would cost CPU on every closure), written to `dir`.
 */
export async function bundleLibrary(
  dir: string,
  entry: "index" | "core/index",
  srcDir = SRC_DIR,
  name = entry.replace("/", "-"),
): Promise<string> {
  const out = join(dir, `${name}.mjs`);
  const result = await build({
    entryPoints: [join(srcDir, `${entry}.ts`)],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  writeFileSync(out, result.outputFiles[0]!.contents);
  return out;
}

interface CpuSubject {
  label: string;
  kind: CpuSubjectKind;
  what: string;
}

const SUBJECTS: CpuSubject[] = [
  { label: "edge-redlock", kind: "edge-redlock:memory", what: "RedisNode in memory" },
  { label: "edge-redlock/core", kind: "edge-redlock-core:memory", what: "RedisNode in memory (backoff waiting)" },
  { label: "edge-redlock", kind: "edge-redlock:rest", what: "restNode + in-memory fetch" },
  { label: SYSTEMS["upstash-lock"].label, kind: "upstash-lock", what: "@upstash/redis + in-memory fetch, 1 node" },
  { label: SYSTEMS["sesame-redlock"].label, kind: "sesame-redlock", what: "ioredis-shaped in-memory client" },
  { label: SYSTEMS["redlock-universal"].label, kind: "redlock-universal", what: "ioredis-shaped in-memory client" },
];

const SUBJECT = fileURLToPath(new URL("../cpu-subject.ts", import.meta.url));

/** A subject's process: send a request, get its one reply. */
class SubjectProcess {
  readonly #child: ChildProcess;
  readonly #label: string;

  constructor(label: string) {
    this.#label = label;
    this.#child = forkTs(SUBJECT);
  }

  async ask(request: CpuRequest): Promise<CpuReply> {
    const reply = new Promise<CpuReply>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`${this.#label}: the process exited (code ${code})`));
      this.#child.once("exit", onExit);
      this.#child.once("message", (message: CpuReply) => {
        this.#child.off("exit", onExit);
        resolve(message);
      });
    });
    this.#child.send(request);
    const answer = await reply;
    if (answer.type === "failed") throw new Error(`${this.#label}: ${answer.error}`);
    return answer;
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill("SIGKILL");
    await exited(this.#child);
  }
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
  const warmUp = smoke ? 50 : 1000;
  part.method.push(
    `N = ${n} instant in-memory nodes. Each subject runs in a process of its own, as a user's process runs one lock library (in one process, a subject's rounds also paid for the garbage the others left). Process CPU (user + system, process.cpuUsage) over ${perRound} sequential acquire + release runs after ${warmUp} to warm up, ${rounds} interleaved rounds (one process at a time), median of rounds.`,
    "edge-redlock is src/index.ts bundled by esbuild (as an application bundler ships it), measured twice: with RedisNode objects answering from memory (library only), and through its fetch transport (restNode) with a fetch answering from memory (library + JSON over Request/Response).",
    "@upstash/lock runs on @upstash/redis with the same in-memory fetch. The TCP peers run on an ioredis-shaped in-memory object: their figure leaves out ioredis itself (RESP encoding, socket writes).",
  );
  const dir = mkdtempSync(join(tmpdir(), "edge-redlock-bench-"));
  const processes = SUBJECTS.map((subject) => new SubjectProcess(`${subject.label} (${subject.what})`));
  try {
    const bundles = { index: await bundleLibrary(dir, "index"), core: await bundleLibrary(dir, "core/index") };
    // One at a time: a subject warming up would take CPU from another's round.
    for (const [i, subject] of SUBJECTS.entries()) {
      const libraryPath = subject.kind === "edge-redlock-core:memory" ? bundles.core : bundles.index;
      await processes[i]!.ask({ type: "prepare", kind: subject.kind, nodes: n, libraryPath, warmUp });
    }
    const perSubject = SUBJECTS.map(() => [] as number[]);
    const requestsPerRun = SUBJECTS.map(() => 0);
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < SUBJECTS.length; k++) {
        const index = (k + round) % SUBJECTS.length;
        const answer = await processes[index]!.ask({ type: "round", runs: perRound });
        if (answer.type !== "round") throw new Error(`unexpected answer ${answer.type}`);
        perSubject[index]!.push(answer.microseconds);
        requestsPerRun[index] = answer.requests;
      }
    }
    for (const subject of processes) await subject.ask({ type: "close" });
    const isPeer = (subject: CpuSubject) => !subject.kind.startsWith("edge-redlock");
    const peerIndexes = SUBJECTS.flatMap((subject, i) => (isPeer(subject) ? [i] : []));
    // A process on this machine runs at one of two speeds (the same build 15 µs per acquire +
    // release in one process, 25 in the next) and can change speed between rounds: each round is
    // also compared with the leanest peer's round, measured seconds apart, not only by its median.
    /** Subject `i`'s rounds, each over `reference` of the same round: their median. */
    const roundByRound = (i: number, reference: (round: number) => number) =>
      median(perSubject[i]!.map((value, round) => value / reference(round)));
    const leanestOfRound = (round: number) => Math.min(...peerIndexes.map((i) => perSubject[i]![round]!));
    const ratioToLeanest = (i: number) => roundByRound(i, leanestOfRound);
    const table = {
      title: `Client CPU per acquire + release (µs, N = ${n}, in-memory nodes)`,
      columns: [
        "system",
        "nodes",
        "µs CPU (median of rounds)",
        "min–max of rounds",
        "÷ the leanest peer of the same round (median)",
        "HTTP requests per run",
        "µs CPU per request",
      ],
      rows: SUBJECTS.map((subject, i) => {
        const values = perSubject[i]!;
        const sent = requestsPerRun[i]!;
        return [
          subject.label,
          subject.what,
          fmt(median(values), 1),
          `${fmt(Math.min(...values), 1)}–${fmt(Math.max(...values), 1)}`,
          `${fmt(ratioToLeanest(i), 2)}×`,
          sent > 0 ? fmt(sent, 1) : "–",
          sent > 0 ? fmt(median(values) / sent, 1) : "–",
        ];
      }),
    };
    part.tables.push(table);
    const indexOf = (kind: CpuSubjectKind) => SUBJECTS.findIndex((subject) => subject.kind === kind);
    const own = median(perSubject[indexOf("edge-redlock:memory")]!);
    part.checks.push({
      target: `client CPU ≤ 20 µs per acquire + release (edge-redlock, N = ${n}, in-memory nodes)`,
      measured: `${fmt(own, 1)} µs`,
      pass: own <= 20,
    });
    // Per HTTP request, the REST transport against @upstash/redis's, both over the same in-memory fetch.
    const perRequest = (i: number) => median(perSubject[i]!) / requestsPerRun[i]!;
    const rest = indexOf("edge-redlock:rest");
    const upstash = indexOf("upstash-lock");
    if (requestsPerRun[rest]! > 0 && requestsPerRun[upstash]! > 0) {
      part.checks.push({
        target: "REST transport: CPU per request ≤ @upstash/redis's (same in-memory fetch)",
        measured: `${fmt(perRequest(rest), 1)} µs against ${fmt(perRequest(upstash), 1)} µs`,
        pass: perRequest(rest) <= perRequest(upstash),
      });
    }
    const leanest = Math.min(...peerIndexes.map((i) => median(perSubject[i]!)));
    if (own > leanest) {
      const core = indexOf("edge-redlock-core:memory");
      const overCore = roundByRound(indexOf("edge-redlock:memory"), (round) => perSubject[core]![round]!);
      part.notes.push(
        `edge-redlock is behind: ${fmt(own, 1)} µs against ${fmt(leanest, 1)} µs for the leanest peer (${fmt(ratioToLeanest(indexOf("edge-redlock:memory")), 2)}× it, round by round). edge-redlock/core, the same algorithm with backoff waiting, is ${fmt(ratioToLeanest(core), 2)}× the leanest peer; the default client's waiting in line costs ${fmt(overCore, 2)}× edge-redlock/core even uncontended (it records the resource as busy in the isolate, marks the fan-out as racing for the gate, and releases through the gate's script, which records the hold). The TCP peers' figure also leaves out ioredis, and the fetch transport (the REST row) costs more than the lock logic itself.`,
      );
    }
  } finally {
    await Promise.all(processes.map((subject) => subject.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
  return part;
}
