/**
 * The cluster fingerprint a node keeps per lock namespace (see `cluster.ts`): what identifies a
 * cluster, how a node is asked for it, and how a foreign one is told in words. Its format is a protocol: changing what goes
 * into it refuses every client of the previous version, so a test pins it.
 * @module
 */
import { ConfigurationError, NodeError } from "../base/errors.js";
import type { NodeOutcome } from "../base/report.js";
import type { RedisNode } from "../transport/rest.js";
import type { TaskContext } from "./fanout.js";
import { clusterScript } from "./scripts/cluster.js";
import { runScriptBySource } from "./scripts/script.js";

/** Bumped when a change makes two versions unsafe side by side on the same nodes. */
export const PROTOCOL_VERSION = 2;

/** The fingerprint key of the lock namespace `keyPrefix` (JSON: no prefix can end where another begins). */
export function clusterKey(keyPrefix: string): string {
  return `__edge-redlock__:cluster:${JSON.stringify(keyPrefix)}`;
}

/**
 * What a node is to the fingerprint: the server its URL names (origin and path; never a display
 * `id`, a token or a query), or a `RedisNode`'s `id` (read as a URL when it is one).
 */
export function serverName(node: RedisNode, config: object): string {
  const name = config === node ? node.id : String((config as { url: unknown }).url);
  try {
    const url = new URL(name);
    if (url.protocol === "https:" || url.protocol === "http:") return url.origin + url.pathname.replace(/\/$/, "");
  } catch {
    // Not a URL: the id itself.
  }
  return name;
}

/** `v<protocol>:<hash>` of the sorted server names, or of `clusterName` instead when given. */
export function clusterFingerprint(servers: readonly string[], clusterName?: string): string {
  const input = clusterName === undefined ? ["nodes", [...servers].sort()] : ["name", clusterName];
  return `v${PROTOCOL_VERSION}:${fnv1a64(JSON.stringify(input))}`;
}

const FINGERPRINT = /^v(\d{1,6}):[0-9a-f]{16}$/;

/** What `Redlock.resetClusterFingerprint()` did. */
export interface ClusterResetResult {
  /** Nodes that now keep this client's fingerprint. The reset is complete when it equals N. */
  readonly reset: number;
  /** Per node: `initialized`, or the failure. */
  readonly nodes: readonly NodeOutcome[];
}

/**
 * Run the check (or the reset) on one node: the fingerprint it keeps now, or a {@link NodeError}
 * for any other answer (a proxy's page, a value of another kind), never taken for another cluster.
 */
export async function keptOnNode(
  node: RedisNode,
  keyPrefix: string,
  fingerprint: string,
  mode: "check" | "reset",
  context: TaskContext,
): Promise<string> {
  const reply = await runScriptBySource(node, clusterScript, [clusterKey(keyPrefix)], [fingerprint, mode], context);
  if (typeof reply === "string" && FINGERPRINT.test(reply)) return reply;
  const what =
    typeof reply === "string" ? `a string of ${reply.length} characters` : reply === null ? "nil" : "another type";
  throw new NodeError(node.id, `unexpected reply to the cluster check from ${node.id}: ${what}`);
}

/** The refusal by the nodes that keep another fingerprint, in words: the values are never shown. */
export function refusal(
  foreign: readonly { index: number; kept: string }[],
  nodes: readonly RedisNode[],
  keyPrefix: string,
): ConfigurationError {
  const sorted = [...foreign].sort((a, b) => a.index - b.index);
  const first = sorted[0] as { index: number; kept: string };
  const version = Number(FINGERPRINT.exec(first.kept)?.[1]);
  const what =
    version === PROTOCOL_VERSION
      ? "a cluster of another node list or clusterName"
      : `a cluster of protocol version ${version} (this client speaks ${PROTOCOL_VERSION})`;
  const which = sorted.map((f) => `node ${f.index + 1} (${nodes[f.index]?.id})`).join(", ");
  return new ConfigurationError(
    `${which} of this client's ${nodes.length} nodes already belong${sorted.length > 1 ? "" : "s"} to ${what} under keyPrefix ${JSON.stringify(keyPrefix)}: clients of different node lists need not share a quorum node, so this client is refused; drain the other deployment, then call resetClusterFingerprint() (see docs/deployments.md)`,
    { node: nodes[first.index]?.id },
  );
}

/** 64-bit FNV-1a of the UTF-8 bytes, in hex: a name for the inputs, not a secret. @internal */
export function fnv1a64(text: string): string {
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  for (const byte of new TextEncoder().encode(text)) {
    lo = (lo ^ byte) >>> 0;
    // × (2^40 + 0x1b3) mod 2^64, in 32-bit halves: lo·0x1b3 is below 2^41, exact in a double.
    const low = lo * 0x1b3;
    hi = (Math.imul(hi, 0x1b3) + Math.imul(lo, 0x100) + Math.floor(low / 0x100000000)) >>> 0;
    lo = low >>> 0;
  }
  return hi.toString(16).padStart(8, "0") + lo.toString(16).padStart(8, "0");
}
