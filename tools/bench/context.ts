/** What every benchmark part gets and returns. */
import type { NodeHost } from "./node-host-client.js";

/** Command-line options, resolved. */
export interface BenchOptions {
  /** Shorter windows, fewer rounds and sizes (under 3 minutes). */
  quick: boolean;
  /** About one second per part: checks the harness runs (npm test), figures are meaningless. */
  smoke: boolean;
  /** Hot-key window per run, in seconds. */
  durationS: number;
  /** Interleaved rounds of the latency parts. */
  rounds: number;
  /** Interleaved rounds of the hot-key grid (each run repeated; medians reported). */
  hotRounds: number;
  /** The final run: the isolates parts take 30 s windows. @default false */
  final?: boolean;
  /** Interleaved rounds of the isolates parts (at least 3 outside smoke mode). @default 3 */
  isolateRounds?: number;
  /** Client processes (isolates) of the isolates parts. @default [8, 16] */
  isolates?: number[];
  /** Callers per client process of the isolates parts. @default [1, 4] */
  callers?: number[];
  /** Systems of the isolates parts, as `id` or `id:policy` (e.g. `edge-redlock`, `upstash-lock:equal`). @default all */
  systems?: string[];
}

export interface BenchContext {
  host: NodeHost;
  options: BenchOptions;
  log: (message: string) => void;
  /** One line stating when and where the figures were measured, for the charts. */
  stamp: string;
}

/** A table of results; cells are already formatted. */
export interface Table {
  title: string;
  columns: string[];
  rows: string[][];
}

/** A target from the issues, checked against this run's figures. */
export interface Check {
  target: string;
  measured: string;
  pass: boolean;
}

/** A chart written next to RESULTS.md. */
export interface Chart {
  file: string;
  title: string;
  svg: string;
}

export interface PartResult {
  id: string;
  title: string;
  /** How it was measured (one line each). */
  method: string[];
  tables: Table[];
  checks: Check[];
  notes: string[];
  charts: Chart[];
  /** Correctness counters that must be 0 (lost updates, overlapping holds), per row label. */
  violations: { label: string; lostUpdates: number; overlaps: number }[];
  /** Raw figures per row (not printed), for tests that check a part's columns. */
  figures?: { label: string; values: Record<string, number> }[];
  /** Wall time of the part, in seconds. */
  seconds?: number;
}

export function emptyPart(id: string, title: string): PartResult {
  return { id, title, method: [], tables: [], checks: [], notes: [], charts: [], violations: [] };
}
