/**
 * The explicit one-time initialisation of a fencing deployment.
 *
 * A node without an incarnation marker is either fresh (never initialised) or lost (it was, and
 * forgot). Nothing on the node tells them apart, so the library never marks a node `ok` by itself:
 * a fenced acquire on a deployment where no node has a marker fails with `FENCING_UNINITIALIZED`,
 * and the operator runs this once. It refuses unless every node answers and none has a marker:
 * - a node with a marker proves the deployment was initialised before, so the empty ones are
 *   lost nodes; clients quarantine and repair them by themselves (no operator action);
 * - an unreachable node might be an initialised one that is down, which would make the others
 *   lost nodes too.
 * If it is interrupted halfway, the nodes it marked make the rest look lost: clients quarantine
 * and repair them, which is safe and only costs one quarantine period.
 *
 * Its one blind spot is a *total* loss: if every node lost its data at once, the deployment looks
 * fresh again and counters restart from zero. Protected resources then reject the new, lower
 * tokens (safe, but stuck) until their `maxSeen` is reset. Durable nodes avoid it.
 * @module
 */
import { type Clock, monotonicClock } from "../base/clock.js";
import { FencingError } from "../base/errors.js";
import type { NodeOutcome } from "../base/report.js";
import { fanOut } from "../core/fanout.js";
import { randomToken } from "../core/token.js";
import type { RedisNode } from "../transport/rest.js";
import { fencingKeys } from "./keys.js";
import { fenceInitOnNode, fenceReadOnNode, outcomeOf } from "./node-operations.js";

/** Options of {@link initializeFencing}. */
export interface InitializeFencingOptions {
  readonly nodes: readonly RedisNode[];
  /** The namespace to initialise (the Redlock's `keyPrefix`). @default "" */
  readonly keyPrefix?: string | undefined;
  /** Deadline of each node request, in milliseconds. @default 2000 */
  readonly requestTimeoutMs?: number | undefined;
  /** @default performance.now() */
  readonly clock?: Clock | undefined;
}

/** The result of `initializeFencing(redlock)` (from `edge-redlock/fencing`). */
export interface InitializeFencingResult {
  /** Nodes marked by this call. Fewer than N when another initialisation raced with it or a node failed midway. */
  readonly initialized: number;
  /** Per node: `initialized`, `not-held` (it got a marker meanwhile) or the failure. */
  readonly nodes: readonly NodeOutcome[];
}

/**
 * Mark every node of a brand-new deployment as initialised for fencing.
 * @throws {FencingError} `FENCING_INIT_REFUSED` when a node already has a marker or cannot be asked.
 */
export async function initializeFencing(options: InitializeFencingOptions): Promise<InitializeFencingResult> {
  const { nodes } = options;
  const keys = fencingKeys(options.keyPrefix ?? "");
  const clock = options.clock ?? monotonicClock;
  const timeoutMs = options.requestTimeoutMs ?? 2000;
  const nodeIds = nodes.map((n) => n.id);

  const probe = fanOut({
    nodeIds,
    yes: "no-marker",
    quorum: nodes.length,
    timeoutMs,
    clock,
    task: async (i, context) => outcomeOf(await fenceReadOnNode(nodes[i] as RedisNode, keys, [], context), "verified"),
  });
  const probed = await probe.outcomes;
  const unreachable = probed.filter((o) => ["error", "timeout", "aborted"].includes(o.outcome));
  if (unreachable.length > 0) {
    throw new FencingError(
      "FENCING_INIT_REFUSED",
      `fencing not initialised: ${unreachable.length} of ${nodes.length} nodes could not be asked (${unreachable.map((o) => o.node).join(", ")}); every node must answer`,
      { cause: unreachable[0]?.error },
    );
  }
  const marked = probed.filter((o) => o.outcome !== "no-marker");
  if (marked.length > 0) {
    throw new FencingError(
      "FENCING_INIT_REFUSED",
      `fencing not initialised: ${marked.length} of ${nodes.length} nodes already carry a marker (${marked.map((o) => o.node).join(", ")}), so this deployment was initialised before; nodes without one are lost and get quarantined and repaired automatically`,
    );
  }

  const mark = fanOut({
    nodeIds,
    yes: "initialized",
    quorum: nodes.length,
    timeoutMs,
    clock,
    task: async (i, context) => outcomeOf(await fenceInitOnNode(nodes[i] as RedisNode, keys, randomToken(), context)),
  });
  const outcomes = await mark.outcomes;
  return { initialized: outcomes.filter((o) => o.outcome === "initialized").length, nodes: outcomes };
}
