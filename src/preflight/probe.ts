/**
 * The questions a preflight asks one node, in order: PING, a write, a Lua script by `EVAL` and by
 * `EVALSHA`, `TIME` twice some hundreds of milliseconds apart, and its eviction and persistence
 * settings (`CONFIG GET`, else `INFO`). At most 8 requests; the write is one probe key under the
 * library's reserved namespace, with a 10 s TTL.
 * @module
 */
import type { Clock } from "../base/clock.js";
import { NodeError } from "../base/errors.js";
import { sleep, within } from "../base/signals.js";
import { RESERVED_KEY_PART } from "../core/keys.js";
import { inspectScript } from "../core/scripts/inspect.js";
import { randomToken } from "../core/token.js";
import type { RedisArgument, RedisNode, RedisReply } from "../transport/rest.js";
import {
  type ClockRate,
  clockFinding,
  clockUnknown,
  describeError,
  type PreflightFinding,
  type ServerSettings,
  scriptsRefused,
  settingsFindings,
  unreachable,
  writesRefused,
} from "./findings.js";

/** What one node's probe needs from the client and the options. */
export interface ProbeContext {
  readonly clock: Clock;
  readonly keyPrefix: string;
  readonly driftFactor: number;
  readonly faultTolerance: number;
  readonly requestTimeoutMs: number;
  readonly clockSpacingMs: number;
  readonly signal: AbortSignal | undefined;
}

/** What was learnt about one node. */
export interface Probed {
  readonly findings: PreflightFinding[];
  readonly latencyMs?: number;
  readonly clockRate?: ClockRate;
  readonly settings?: ServerSettings;
}

const PROBE_TTL_MS = 10_000;
/** What the clocks' granularity can add to a reading, in ms (a memory node's TIME counts whole ms). */
const CLOCK_GRANULARITY_MS = 1;

/** The reason a preflight request gives up. */
class NoAnswer extends NodeError {
  constructor(node: string, timeoutMs: number) {
    super(node, `no answer from ${node} within ${timeoutMs} ms`);
  }
}

/** Send one command with its own deadline; a node that ignores the abort does not hold the check up. */
async function ask(node: RedisNode, args: readonly RedisArgument[], p: ProbeContext): Promise<RedisReply> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(p.signal?.reason);
  p.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const reply = await within(node.command(args, controller.signal), p.requestTimeoutMs, p.signal);
    if (reply === undefined) {
      const error = new NoAnswer(node.id, p.requestTimeoutMs);
      controller.abort(error);
      throw error;
    }
    return reply;
  } finally {
    p.signal?.removeEventListener("abort", onAbort);
  }
}

/** Run every check on one node. Never throws but for the caller's abort. */
export async function probeNode(node: RedisNode, p: ProbeContext): Promise<Probed> {
  const id = node.id;
  const findings: PreflightFinding[] = [];

  // Reachability and credentials: nothing else is worth asking a node that fails this.
  const start = p.clock.now();
  let latencyMs: number;
  try {
    const pong = await ask(node, ["PING"], p);
    latencyMs = p.clock.now() - start;
    if (pong !== "PONG") {
      return {
        findings: [unreachable(id, new NodeError(id, `${id} answered PING with something else than PONG`))],
      };
    }
  } catch (error) {
    rethrowIf(p, error);
    return { findings: [unreachable(id, error)] };
  }
  findings.push({ code: "REACHABLE", level: "ok", message: `${id} answered PING in ${latencyMs.toFixed(1)} ms` });

  // A write, read back by a script: what every lock needs.
  const key = `${p.keyPrefix}${RESERVED_KEY_PART}preflight:${randomToken()}`;
  const value = randomToken();
  let written = false;
  try {
    written = (await ask(node, ["SET", key, value, "PX", PROBE_TTL_MS], p)) === "OK";
    if (!written) findings.push(writesRefused(id, new NodeError(id, `${id} answered SET without OK`)));
    else findings.push({ code: "WRITES_OK", level: "ok", message: `${id} took a write` });
  } catch (error) {
    rethrowIf(p, error);
    findings.push(writesRefused(id, error));
  }
  findings.push(...(await checkScripts(node, key, written ? value : null, p)));

  const clock = await measureClock(node, p);
  findings.push(clock.finding);
  const settings = await readSettings(node, p);
  findings.push(...settingsFindings(id, settings, p.faultTolerance));

  const probed: { -readonly [K in keyof Probed]: Probed[K] } = { findings, latencyMs };
  if (clock.rate !== undefined) probed.clockRate = clock.rate;
  if (settings !== undefined) probed.settings = settings;
  return probed;
}

/** `EVAL` of the library's read script, then `EVALSHA` of it: both must read the probe key back. */
async function checkScripts(
  node: RedisNode,
  key: string,
  expected: string | null,
  p: ProbeContext,
): Promise<PreflightFinding[]> {
  const id = node.id;
  const readsBack = (reply: RedisReply) =>
    Array.isArray(reply) &&
    reply.length === 2 &&
    reply[0] === expected &&
    typeof reply[1] === "number" &&
    (expected === null ? reply[1] === -2 : reply[1] > 0);
  for (const [what, args] of [
    ["EVAL", ["EVAL", inspectScript.source, 1, key]],
    ["EVALSHA", ["EVALSHA", inspectScript.sha1, 1, key]],
  ] as const) {
    try {
      const reply = await ask(node, args, p);
      if (!readsBack(reply)) return [scriptsRefused(id, what, "its answer did not read back the probe key")];
    } catch (error) {
      rethrowIf(p, error);
      if (what === "EVALSHA" && error instanceof NodeError && error.redisError?.toUpperCase().includes("NOSCRIPT")) {
        return [
          {
            code: "SCRIPT_CACHE_MISSING",
            level: "warn",
            message: `${id} runs scripts by EVAL but does not find them by EVALSHA right after`,
            advice:
              "Every script then costs a second request (the EVAL fallback): on Workers, a second subrequest. Check the endpoint's script cache.",
          },
        ];
      }
      return [scriptsRefused(id, what, describeError(error))];
    }
  }
  return [{ code: "SCRIPTS_OK", level: "ok", message: `${id} runs Lua scripts by EVAL and EVALSHA` }];
}

/** The caller's abort ends the whole check, rather than making one finding. */
function rethrowIf(p: ProbeContext, error: unknown): void {
  if (p.signal?.aborted) throw error;
}

/** One `TIME` reading: the node's time in ms, and the local round trip around it. */
async function readTime(node: RedisNode, p: ProbeContext): Promise<{ nodeMs: number; midMs: number; rttMs: number }> {
  const sent = p.clock.now();
  const reply = await ask(node, ["TIME"], p);
  const received = p.clock.now();
  const [seconds, micros] = Array.isArray(reply) ? reply.map(Number) : [];
  if (!Number.isSafeInteger(seconds) || !Number.isSafeInteger(micros)) {
    throw new NodeError(node.id, `${node.id} answered TIME with something else than [seconds, microseconds]`);
  }
  return {
    nodeMs: (seconds as number) * 1000 + (micros as number) / 1000,
    midMs: (sent + received) / 2,
    rttMs: received - sent,
  };
}

/** The node clock's rate against the local clock, from two `TIME` readings `clockSpacingMs` apart. */
async function measureClock(
  node: RedisNode,
  p: ProbeContext,
): Promise<{ finding: PreflightFinding; rate?: ClockRate }> {
  try {
    const first = await readTime(node, p);
    await sleep(p.clockSpacingMs, p.signal);
    const second = await readTime(node, p);
    const localElapsedMs = second.midMs - first.midMs;
    if (!(localElapsedMs > 0)) throw new NodeError(node.id, "the local clock did not advance between the readings");
    const nodeElapsedMs = second.nodeMs - first.nodeMs;
    const ratio = nodeElapsedMs / localElapsedMs;
    // Each reading was taken somewhere within its round trip, at most half of it from the
    // midpoint, plus a millisecond for the clocks' granularity: the local time between the
    // readings is within `slack` of `localElapsedMs`. The ratio's bounds are the node's elapsed
    // time over the two extremes, which lie further from `ratio` the further it is from 1, and
    // further above it than below.
    const slack = (first.rttMs + second.rttMs) / 2 + CLOCK_GRANULARITY_MS;
    const shortest = localElapsedMs - slack;
    const highest = shortest > 0 ? nodeElapsedMs / shortest : Number.POSITIVE_INFINITY;
    const lowest = nodeElapsedMs / (localElapsedMs + slack);
    const rate: ClockRate = {
      ratio,
      uncertainty: Math.max(highest - ratio, ratio - lowest),
      localElapsedMs,
    };
    return { finding: clockFinding(node.id, rate, p.driftFactor), rate };
  } catch (error) {
    rethrowIf(p, error);
    return { finding: clockUnknown(node.id, error) };
  }
}

const CONFIG_PARAMETERS = ["maxmemory-policy", "maxmemory", "appendonly", "appendfsync", "save"];

/**
 * Eviction and persistence settings: `CONFIG GET` where the endpoint serves it (a self-hosted
 * node), else `INFO` (its memory and persistence sections), else `undefined`. A refusal is an
 * unknown, never a failure: Upstash serves neither.
 */
async function readSettings(node: RedisNode, p: ProbeContext): Promise<ServerSettings | undefined> {
  try {
    const settings = parseConfig(await ask(node, ["CONFIG", "GET", ...CONFIG_PARAMETERS], p));
    if (settings !== undefined) return settings;
  } catch (error) {
    rethrowIf(p, error);
  }
  try {
    return parseInfo(await ask(node, ["INFO"], p));
  } catch (error) {
    rethrowIf(p, error);
    return undefined;
  }
}

/** A `CONFIG GET` reply: a flat array of name/value pairs. */
export function parseConfig(reply: RedisReply): ServerSettings | undefined {
  if (!Array.isArray(reply)) return undefined;
  const values = new Map<string, string>();
  for (let i = 0; i + 1 < reply.length; i += 2) {
    const [name, value] = [reply[i], reply[i + 1]];
    if (typeof name === "string" && (typeof value === "string" || typeof value === "number"))
      values.set(name.toLowerCase(), String(value));
  }
  if (!values.has("maxmemory-policy") && !values.has("appendonly")) return undefined;
  const appendonly = values.get("appendonly");
  return {
    source: "config",
    evictionPolicy: values.get("maxmemory-policy"),
    maxmemoryBytes: integerOrUndefined(values.get("maxmemory")),
    aof: appendonly === undefined ? undefined : appendonly === "yes",
    appendfsync: values.get("appendfsync"),
    snapshots: values.get("save"),
  };
}

/** An `INFO` reply: `name:value` lines in `# Section` blocks. */
export function parseInfo(reply: RedisReply): ServerSettings | undefined {
  if (typeof reply !== "string") return undefined;
  const values = new Map<string, string>();
  for (const line of reply.split(/\r?\n/)) {
    const at = line.indexOf(":");
    if (at > 0 && !line.startsWith("#")) values.set(line.slice(0, at).trim(), line.slice(at + 1).trim());
  }
  const aofEnabled = values.get("aof_enabled");
  const evictionPolicy = values.get("maxmemory_policy");
  if (evictionPolicy === undefined && aofEnabled === undefined) return undefined;
  return {
    source: "info",
    evictionPolicy,
    maxmemoryBytes: integerOrUndefined(values.get("maxmemory")),
    aof: aofEnabled === undefined ? undefined : aofEnabled === "1",
  };
}

function integerOrUndefined(text: string | undefined): number | undefined {
  const value = text === undefined ? Number.NaN : Number(text);
  return Number.isSafeInteger(value) ? value : undefined;
}
