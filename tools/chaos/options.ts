/**
 * Command-line options of `npm run chaos`.
 * @module
 */

/** Parsed options. */
export interface ChaosOptions {
  /** Seed of every random choice. @default 1 */
  readonly seed: number;
  /**
   * Total workload time in seconds, shared by the random scenarios (the driven ones take the time
   * their fixed schedule takes). @default 3 per random scenario
   */
  readonly durationS: number | undefined;
  /** Scenario name, or "all". @default "all" */
  readonly scenario: string;
  /** Client processes per random scenario (each can be SIGSTOPped or killed on its own). @default 3 */
  readonly processes: number;
  /** Concurrent lock workers per random scenario, spread over the processes. @default the process count */
  readonly clients: number;
  /** Where history.jsonl, report.json and the SVG timelines go. @default a new temp directory */
  readonly out: string | undefined;
}

/**
 * Parses `--seed S --duration D --scenario NAME|all [--clients K] [--processes P] [--out DIR]`.
 * K below P is raised to P (every process runs at least one worker).
 */
export function parseOptions(argv: readonly string[]): ChaosOptions {
  const values = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const match = /^--([a-z]+)(?:=(.*))?$/.exec(arg);
    if (!match) throw new Error(`unexpected argument ${JSON.stringify(arg)}`);
    const [, name, inline] = match as unknown as [string, string, string | undefined];
    const value = inline ?? argv[++i];
    if (value === undefined) throw new Error(`--${name} needs a value`);
    values.set(name, value);
  }
  const known = new Set(["seed", "duration", "scenario", "clients", "processes", "out"]);
  for (const name of values.keys()) if (!known.has(name)) throw new Error(`unknown option --${name}`);
  const int = (name: string, fallback: number, min: number) => {
    const text = values.get(name);
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer ≥ ${min}, got ${text}`);
    return n;
  };
  const duration = values.get("duration");
  const durationS = duration === undefined ? undefined : Number(duration);
  if (durationS !== undefined && (!Number.isFinite(durationS) || durationS <= 0)) {
    throw new Error(`--duration must be a positive number of seconds, got ${duration}`);
  }
  return {
    seed: int("seed", 1, 0),
    durationS,
    scenario: values.get("scenario") ?? "all",
    processes: int("processes", 3, 2),
    clients: Math.max(int("clients", int("processes", 3, 2), 2), int("processes", 3, 2)),
    out: values.get("out"),
  };
}
