/**
 * What a preflight can find, and how each answer becomes a finding: a stable code, a level, a
 * message and, where there is something to do, advice. Messages name a node by its id (a REST
 * node's id is its URL without credentials) and quote only this library's own error messages,
 * which never carry a token.
 * @module
 */
import { ConfigurationError, NodeError, RedlockError } from "../base/errors.js";

/** How serious a finding is: `error` means locks will fail or are not safe on this setup. */
export type PreflightLevel = "ok" | "warn" | "error";

/**
 * The stable code of a finding.
 * - Per node, whether it can take locks: `REACHABLE`, `UNREACHABLE` (network error, timeout, an
 *   error status), `AUTH_REJECTED` (401/403: a wrong token), `NOT_REST_ENDPOINT` (404, 405, a
 *   redirect or an answer that is not a Redis REST reply: a wrong URL or path), `WRITES_OK`,
 *   `WRITES_REFUSED` (e.g. a read-only token), `SCRIPTS_OK`, `SCRIPTS_REFUSED`,
 *   `SCRIPT_CACHE_MISSING` (`EVALSHA` does not find a script `EVAL` just ran: every script costs
 *   two requests).
 * - The node clock's rate against the local monotonic clock: `CLOCK_RATE_OK`, `CLOCK_RATE_FAST`
 *   (faster by more than `driftFactor`: keys expire before the client counts their TTL out),
 *   `CLOCK_RATE_SLOW`, `CLOCK_RATE_INCONCLUSIVE` (the round trips are too slow to tell),
 *   `CLOCK_UNKNOWN` (`TIME` refused).
 * - Where the node says (`CONFIG GET` or `INFO`): `EVICTION_OFF`, `EVICTION_ON`,
 *   `EVICTION_UNKNOWN`, `PERSISTENCE_AOF`, `PERSISTENCE_NO_AOF`, `PERSISTENCE_UNKNOWN`.
 * - For the cluster: `QUORUM_OK`, `QUORUM_NO_MARGIN` (exactly a quorum of nodes is healthy),
 *   `QUORUM_UNREACHABLE` (fewer: every acquisition fails).
 */
export type PreflightCode =
  | "REACHABLE"
  | "UNREACHABLE"
  | "AUTH_REJECTED"
  | "NOT_REST_ENDPOINT"
  | "WRITES_OK"
  | "WRITES_REFUSED"
  | "SCRIPTS_OK"
  | "SCRIPTS_REFUSED"
  | "SCRIPT_CACHE_MISSING"
  | "CLOCK_RATE_OK"
  | "CLOCK_RATE_FAST"
  | "CLOCK_RATE_SLOW"
  | "CLOCK_RATE_INCONCLUSIVE"
  | "CLOCK_UNKNOWN"
  | "EVICTION_OFF"
  | "EVICTION_ON"
  | "EVICTION_UNKNOWN"
  | "PERSISTENCE_AOF"
  | "PERSISTENCE_NO_AOF"
  | "PERSISTENCE_UNKNOWN"
  | "QUORUM_OK"
  | "QUORUM_NO_MARGIN"
  | "QUORUM_UNREACHABLE";

/** One thing a preflight found. */
export interface PreflightFinding {
  /** What was found; stable across versions. */
  readonly code: PreflightCode;
  /** How serious it is. */
  readonly level: PreflightLevel;
  /** One line that says what was found. */
  readonly message: string;
  /** What to do about it, when there is something to do. */
  readonly advice?: string;
}

/** The node clock's rate measured against the local clock over the check. */
export interface ClockRate {
  /** Node time elapsed between the two `TIME` readings divided by local time elapsed: 1 is a perfect match. */
  readonly ratio: number;
  /**
   * How far off `ratio` can be (each `TIME` ran somewhere within its request's round trip, and
   * the clocks count in steps of up to a millisecond): the true ratio is within `ratio ± uncertainty`.
   */
  readonly uncertainty: number;
  /** Local time between the two readings (midpoints of their round trips), in ms. */
  readonly localElapsedMs: number;
}

/** What the node says about eviction and persistence, where it says it. */
export interface ServerSettings {
  /** Where it came from: `CONFIG GET` or `INFO`. */
  readonly source: "config" | "info";
  /** `maxmemory-policy`, e.g. `noeviction`. */
  readonly evictionPolicy?: string | undefined;
  /** `maxmemory` in bytes (0: no limit). */
  readonly maxmemoryBytes?: number | undefined;
  /** Whether the append-only file is on. */
  readonly aof?: boolean | undefined;
  /** `appendfsync` (`always`, `everysec`, `no`): only `CONFIG GET` tells. */
  readonly appendfsync?: string | undefined;
  /** The RDB snapshot schedule (`save`; empty: none): only `CONFIG GET` tells. */
  readonly snapshots?: string | undefined;
}

const finding = (code: PreflightCode, level: PreflightLevel, message: string, advice?: string): PreflightFinding =>
  advice === undefined ? { code, level, message } : { code, level, message, advice };

/** A message for an error that is safe to show: this library's own, or only the error's name. */
export function describeError(error: unknown): string {
  if (error instanceof RedlockError) return error.message;
  if (error instanceof Error) return `${error.name} (its message is not shown: it may carry a secret)`;
  return "an unknown error";
}

/** The status an error carries, if any (a transport error keeps the HTTP status). */
function statusOf(error: unknown): number | undefined {
  if (error instanceof NodeError || error instanceof ConfigurationError) return error.status;
  return undefined;
}

/** The finding for a node whose first request (PING) failed. */
export function unreachable(node: string, error: unknown): PreflightFinding {
  const status = statusOf(error);
  const message = describeError(error);
  if (error instanceof ConfigurationError && (status === 401 || status === 403)) {
    return finding(
      "AUTH_REJECTED",
      "error",
      `${node} rejected the token (HTTP ${status})`,
      "Pass the database's REST token (on Upstash the Standard one, not the read-only one).",
    );
  }
  const notRedisReply =
    error instanceof NodeError && error.redisError === undefined && status !== undefined && status < 300;
  if (
    (status !== undefined && (status === 404 || status === 405 || (status >= 300 && status < 400))) ||
    notRedisReply
  ) {
    return finding(
      "NOT_REST_ENDPOINT",
      "error",
      `${node} answers, but not as a Redis REST endpoint: ${message}`,
      "Check the URL: it must be the database's REST URL (e.g. https://eu1-example.upstash.io), with no extra path.",
    );
  }
  if (error instanceof ConfigurationError) return finding("NOT_REST_ENDPOINT", "error", message);
  return finding(
    "UNREACHABLE",
    "error",
    `${node} could not be reached: ${message}`,
    "Check that the node is up and that this runtime can reach its URL.",
  );
}

/** The finding for a refused write (`SET` of a probe key). */
export function writesRefused(node: string, error: unknown): PreflightFinding {
  return finding(
    "WRITES_REFUSED",
    "error",
    `${node} refused a write: ${describeError(error)}`,
    "Locks need writes: pass a token that may write (on Upstash the Standard token, not the read-only one).",
  );
}

/** The finding for a refused or wrong script answer. */
export function scriptsRefused(node: string, what: string, detail: string): PreflightFinding {
  return finding(
    "SCRIPTS_REFUSED",
    "error",
    `${node} did not run a Lua script with ${what}: ${detail}`,
    "Extension, release and multi-resource locks run Lua scripts: use an endpoint that serves EVAL and EVALSHA.",
  );
}

/** The finding for a node clock rate measured against `driftFactor`. */
export function clockFinding(node: string, rate: ClockRate, driftFactor: number): PreflightFinding {
  const { ratio, uncertainty } = rate;
  const shown = `×${ratio.toFixed(4)} (±${uncertainty.toFixed(4)}) over ${Math.round(rate.localElapsedMs)} ms`;
  if (ratio - uncertainty > 1 + driftFactor) {
    return finding(
      "CLOCK_RATE_FAST",
      "error",
      `${node}'s clock runs fast against this one: ${shown}, beyond driftFactor ${driftFactor}`,
      "Its keys expire before the client has counted their TTL out, so a lock can be granted twice: fix the node's (or this machine's) clock, or raise driftFactor above the measured rate.",
    );
  }
  if (ratio + uncertainty > 1 + driftFactor) {
    return finding(
      "CLOCK_RATE_INCONCLUSIVE",
      "warn",
      `${node}'s clock rate ${shown} cannot be told apart from driftFactor ${driftFactor}: the round trips are too slow for this spacing`,
      "Run the check again with a larger clockSpacingMs.",
    );
  }
  if (ratio + uncertainty < 1 - driftFactor) {
    return finding(
      "CLOCK_RATE_SLOW",
      "warn",
      `${node}'s clock runs slow against this one: ${shown}, beyond driftFactor ${driftFactor}`,
      "Safe for the lock holder (keys outlive their TTL), but a crashed holder's lock lasts longer, and one of the two clocks is off.",
    );
  }
  return finding("CLOCK_RATE_OK", "ok", `${node}'s clock rate ${shown} is within driftFactor ${driftFactor}`);
}

/** The finding for a node whose `TIME` could not be read. */
export function clockUnknown(node: string, error: unknown): PreflightFinding {
  return finding("CLOCK_UNKNOWN", "ok", `${node}'s clock could not be read with TIME: ${describeError(error)}`);
}

/** The findings on eviction and persistence, from what the node said (`undefined`: it said nothing). */
export function settingsFindings(
  node: string,
  settings: ServerSettings | undefined,
  faultTolerance: number,
): PreflightFinding[] {
  return [evictionFinding(node, settings), persistenceFinding(node, settings, faultTolerance)];
}

function evictionFinding(node: string, settings: ServerSettings | undefined): PreflightFinding {
  const policy = settings?.evictionPolicy;
  if (policy === undefined) {
    return finding(
      "EVICTION_UNKNOWN",
      "ok",
      `${node} does not tell its eviction policy (it answers neither CONFIG GET nor INFO, as Upstash does)`,
      "Make sure the database never evicts keys (on Upstash: eviction off), or keep it far from full.",
    );
  }
  if (policy === "noeviction") {
    return finding(
      "EVICTION_OFF",
      "ok",
      `${node} never evicts keys (maxmemory-policy noeviction): when full, it refuses writes instead`,
    );
  }
  const which = policy.startsWith("volatile-")
    ? "evicts keys that have a TTL, and every lock key has one"
    : "evicts any key, lock keys and the cluster's own keys included";
  const limit = settings?.maxmemoryBytes === 0 ? " (maxmemory is 0: nothing is evicted until a limit is set)" : "";
  return finding(
    "EVICTION_ON",
    "warn",
    `${node} has maxmemory-policy ${policy}: it ${which}; under memory pressure it can drop a held lock, which another client can then take${limit}`,
    "Set maxmemory-policy noeviction on lock nodes (a full node then refuses new locks instead of dropping held ones), or keep other data off them.",
  );
}

function persistenceFinding(
  node: string,
  settings: ServerSettings | undefined,
  faultTolerance: number,
): PreflightFinding {
  if (settings?.aof === undefined) {
    return finding(
      "PERSISTENCE_UNKNOWN",
      "ok",
      `${node} does not tell whether it persists its data (it answers neither CONFIG GET nor INFO, as Upstash does)`,
    );
  }
  if (settings.aof) {
    const fsync =
      settings.appendfsync === undefined || settings.appendfsync === "always"
        ? ""
        : ` (appendfsync ${settings.appendfsync}: a crash can still lose the last writes, a lock granted just before included)`;
    return finding("PERSISTENCE_AOF", "ok", `${node} keeps an append-only file${fsync}`);
  }
  const snapshots =
    settings.snapshots === undefined
      ? "snapshots unknown"
      : settings.snapshots.trim() === ""
        ? "no snapshots either"
        : `snapshots only (save ${settings.snapshots})`;
  return finding(
    "PERSISTENCE_NO_AOF",
    "warn",
    `${node} keeps no append-only file (${snapshots}): a restart forgets the locks it granted since the last snapshot, and another client can then be granted one that is still held`,
    `Turn on appendonly (appendfsync always loses nothing), or keep a restarted node out for longer than the longest TTL, or set faultTolerance (now ${faultTolerance}) to the number of nodes that may restart at once; fencing (edge-redlock/fencing) quarantines a node that restarted empty.`,
  );
}

/** The cluster-level finding: how many nodes can take locks against the quorum. */
export function quorumFinding(healthy: number, total: number, quorum: number): PreflightFinding {
  const counted = `${healthy} of ${total} nodes can take locks safely, and the quorum is ${quorum}`;
  if (healthy < quorum) {
    return finding(
      "QUORUM_UNREACHABLE",
      "error",
      `${counted}: every acquisition will fail`,
      "Fix the failing nodes: their own findings say how.",
    );
  }
  if (healthy === quorum && total > quorum) {
    return finding(
      "QUORUM_NO_MARGIN",
      "warn",
      `${counted}: one more failing node stops every acquisition`,
      "Fix the failing nodes: their own findings say how.",
    );
  }
  return finding("QUORUM_OK", "ok", counted);
}

/** The worst level of some findings. */
export function worst(findings: readonly PreflightFinding[]): PreflightLevel {
  if (findings.some((f) => f.level === "error")) return "error";
  return findings.some((f) => f.level === "warn") ? "warn" : "ok";
}
