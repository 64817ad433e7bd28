/**
 * The preflight: `checkNodes(redlock)` asks every node of a client what the lock depends on and
 * reports what it found, per node and for the cluster, with advice. A named export, so a bundle
 * that never calls it carries none of it.
 * @module
 */
import { AbortedError, InvalidArgumentError } from "../base/errors.js";
import { MAX_DELAY_MS } from "../core/options.js";
import type { Redlock } from "../core/redlock.js";
import {
  type ClockRate,
  type PreflightFinding,
  type PreflightLevel,
  quorumFinding,
  type ServerSettings,
  worst,
} from "./findings.js";
import { type ProbeContext, probeNode } from "./probe.js";

export type { ClockRate, PreflightCode, PreflightFinding, PreflightLevel, ServerSettings } from "./findings.js";

/** Options of {@link checkNodes}. */
export interface CheckNodesOptions {
  /**
   * Time between the two `TIME` readings of each node, in ms: the longer, the finer the clock-rate
   * measurement (its uncertainty is about a round trip divided by this). The check takes about
   * this long plus 7 round trips.
   * @default 500
   */
  clockSpacingMs?: number | undefined;
  /**
   * Deadline of each request, in ms.
   * @default the larger of the client's `requestTimeoutMs` (for a 10 s TTL) and 2000
   */
  requestTimeoutMs?: number | undefined;
  /**
   * Cancels the check: it then rejects with an `AbortedError`.
   * @default undefined (the check runs to its end: each request is bounded by `requestTimeoutMs`)
   */
  signal?: AbortSignal | undefined;
}

/** What {@link checkNodes} found on one node. */
export interface NodeCheck {
  /** The node's id (a REST node's URL, without credentials). */
  readonly node: string;
  /** The worst level of its findings. */
  readonly level: PreflightLevel;
  /** Round trip of a `PING`, in ms (absent when the node could not be reached). */
  readonly latencyMs?: number;
  /** The node clock's rate against the local clock (absent when `TIME` could not be read twice). */
  readonly clockRate?: ClockRate;
  /** Its eviction and persistence settings, where it tells them (self-hosted nodes; not Upstash). */
  readonly settings?: ServerSettings;
  /** Everything found on the node, in the order it was checked. */
  readonly findings: readonly PreflightFinding[];
}

/** What {@link checkNodes} returns. Plain data: it can be logged or serialised as is. */
export interface PreflightReport {
  /** No finding at level `error`: every node that can take locks takes them safely, and a quorum can. */
  readonly ok: boolean;
  /** The worst level of every finding. */
  readonly level: PreflightLevel;
  /** The quorum the client's options give. */
  readonly quorum: number;
  /** Per node, in configuration order. */
  readonly nodes: readonly NodeCheck[];
  /** About the cluster as a whole (whether a quorum of nodes can take locks). */
  readonly findings: readonly PreflightFinding[];
  /**
   * The report in a few lines for a console: a heading, one line per node, then each finding that
   * is not `ok` (the same finding on several nodes once, with its advice).
   */
  readonly summary: readonly string[];
}

const OPTION_KEYS = ["clockSpacingMs", "requestTimeoutMs", "signal"];

/**
 * Check a client's nodes before relying on them: per node, whether it answers (`PING` latency),
 * accepts the token, is a Redis REST endpoint, takes writes and runs the library's Lua scripts
 * (`EVAL`, then `EVALSHA`); its clock's rate against this runtime's monotonic clock over the check
 * (two `TIME` readings, compared with `driftFactor`); and, where the endpoint answers `CONFIG GET`
 * or `INFO` (a self-hosted node; Upstash answers neither, which is reported as unknown, not as a
 * failure), its eviction policy and persistence. Each finding has a stable code, a level and
 * advice. It sends at most 8 requests per node (on Workers, subrequests), all nodes at once, and
 * writes one probe key per node (reserved namespace, 10 s TTL). No token appears in the report.
 *
 * @example
 * ```ts
 * const report = await checkNodes(redlock);
 * for (const line of report.summary) console.log(line);
 * if (!report.ok) throw new Error("the lock nodes are not ready");
 * ```
 * @throws {InvalidArgumentError} for a value that is not a Redlock client, or a bad option.
 * @throws {AbortedError} when `options.signal` aborts.
 */
export async function checkNodes(redlock: Redlock, options: CheckNodesOptions = {}): Promise<PreflightReport> {
  const engine = (redlock as Partial<Redlock> | null)?.engine;
  if (engine === undefined) throw new InvalidArgumentError("checkNodes() needs a Redlock client");
  if (typeof options !== "object" || options === null) {
    throw new InvalidArgumentError("the options of checkNodes() must be an object");
  }
  for (const name of Object.keys(options)) {
    if (!OPTION_KEYS.includes(name)) {
      throw new InvalidArgumentError(
        `unknown option ${JSON.stringify(name)} in checkNodes(); the options are ${OPTION_KEYS.join(", ")}`,
      );
    }
  }
  const o = engine.resolve(undefined, 10_000);
  const { signal } = options;
  if (signal !== undefined && typeof (signal as Partial<AbortSignal>)?.addEventListener !== "function") {
    throw new InvalidArgumentError("the signal of checkNodes() must be an AbortSignal");
  }
  const context: ProbeContext = {
    clock: o.clock,
    keyPrefix: o.keyPrefix,
    driftFactor: o.driftFactor,
    faultTolerance: o.faultTolerance,
    requestTimeoutMs: milliseconds(options.requestTimeoutMs, Math.max(o.requestTimeoutMs, 2000), "requestTimeoutMs"),
    clockSpacingMs: milliseconds(options.clockSpacingMs, 500, "clockSpacingMs"),
    signal,
  };
  if (signal?.aborted) throw new AbortedError("checkNodes() was aborted", [], signal.reason);
  let probed: Awaited<ReturnType<typeof probeNode>>[];
  try {
    probed = await Promise.all(engine.nodes.map((node) => probeNode(node, context)));
  } catch (error) {
    if (signal?.aborted) throw new AbortedError("checkNodes() was aborted", [], signal.reason);
    throw error;
  }
  const nodes: NodeCheck[] = probed.map((result, i) => {
    const check: { -readonly [K in keyof NodeCheck]: NodeCheck[K] } = {
      node: engine.nodeIds[i] as string,
      level: worst(result.findings),
      findings: result.findings,
    };
    if (result.latencyMs !== undefined) check.latencyMs = result.latencyMs;
    if (result.clockRate !== undefined) check.clockRate = result.clockRate;
    if (result.settings !== undefined) check.settings = result.settings;
    return check;
  });
  const healthy = nodes.filter((node) => node.level !== "error").length;
  const findings = [quorumFinding(healthy, nodes.length, o.quorum)];
  const level = worst([...findings, ...nodes.flatMap((node) => node.findings)]);
  return {
    ok: level !== "error",
    level,
    quorum: o.quorum,
    nodes,
    findings,
    summary: summarize(nodes, findings, o.quorum),
  };
}

function milliseconds(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_DELAY_MS) {
    throw new InvalidArgumentError(
      `${name} of checkNodes() must be a whole number of milliseconds from 1 to ${MAX_DELAY_MS}`,
    );
  }
  return value;
}

/** The report in a few lines (see {@link PreflightReport.summary}). */
function summarize(nodes: readonly NodeCheck[], cluster: readonly PreflightFinding[], quorum: number): string[] {
  const all = [...nodes.flatMap((node) => node.findings), ...cluster];
  const count = (level: PreflightLevel) => all.filter((f) => f.level === level).length;
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
  const lines = [
    `preflight of ${nodes.length} nodes (quorum ${quorum}): ${plural(count("error"), "error")}, ${plural(count("warn"), "warning")}`,
  ];
  const width = Math.max(...nodes.map((node) => node.node.length));
  for (const node of nodes) {
    const facts =
      node.latencyMs === undefined
        ? ["no answer"]
        : [
            `ping ${node.latencyMs.toFixed(1)} ms`,
            node.clockRate === undefined ? "clock unknown" : `clock ×${node.clockRate.ratio.toFixed(4)}`,
            `eviction ${node.settings?.evictionPolicy ?? "unknown"}`,
            `persistence ${persistence(node.settings)}`,
          ];
    lines.push(`  ${node.level.padEnd(5)} ${node.node.padEnd(width)}  ${facts.join(", ")}`);
  }
  // The same finding on several nodes is shown once: by code, with the nodes counted.
  const shown = new Map<string, { finding: PreflightFinding; nodes: number }>();
  for (const finding of all) {
    if (finding.level === "ok") continue;
    const seen = shown.get(finding.code);
    if (seen) seen.nodes++;
    else shown.set(finding.code, { finding, nodes: 1 });
  }
  for (const { finding, nodes: times } of shown.values()) {
    const more = times > 1 ? ` (and ${times - 1} more node${times > 2 ? "s" : ""})` : "";
    lines.push(
      `  ${finding.level} ${finding.code}: ${finding.message}${more}${finding.advice ? `. ${finding.advice}` : ""}`,
    );
  }
  return lines;
}

function persistence(settings: ServerSettings | undefined): string {
  if (settings?.aof === undefined) return "unknown";
  if (settings.aof) return `AOF${settings.appendfsync ? ` (${settings.appendfsync})` : ""}`;
  if (settings.snapshots === undefined) return "no AOF";
  return settings.snapshots.trim() === "" ? "none" : `snapshots only (${settings.snapshots})`;
}
