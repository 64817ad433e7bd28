/**
 * Quarantine and repair, run in the background of a fenced attempt once all its phase-1 answers
 * are in. Both only ever make a node *more* careful or raise counters, so running them twice, or
 * concurrently from several clients, is harmless.
 *
 * ## Quarantine: who may decide that an empty node is a lost one
 *
 * A script on one node cannot see the others, so it cannot tell a lost node from one of a fresh,
 * never initialised deployment. It therefore never grants nor acknowledges without a marker
 * (`NO_MARKER`), and writes nothing. The client decides: if *another* node of the same attempt
 * answered with a marker, the deployment was initialised, so a node without one lost its data (or
 * was added later, or missed a partial initialisation): the client quarantines it atomically
 * (`fence-quarantine`: marker := `recovering:<fresh id>`, quarantine key with PX quarantineMs,
 * only if the marker is still absent). Safety does not depend on the client being right: a
 * quarantined node only sits out and is repaired before it counts again, which is always safe; the
 * one unsafe move, marking an empty node `ok`, only `initializeFencing` makes, and it refuses as
 * soon as any node has a marker.
 *
 * ## Repair: per resource, from a quorum read made after the quarantine
 *
 * A lost node lost every counter, but a client only knows the counters of its own lock's
 * resources. So repair is per resource: after its quarantine a recovering node answers
 * `NEEDS_REPAIR` for any resource without a repair stamp of its current incarnation, and a client
 * that saw that answer reads those resources from a quorum of healthy nodes, *after* the answer
 * arrived (hence after the quarantine ended), and runs `fence-repair`: `F := max(F, m)` and
 * stamp := incarnation id, only if the node is still in that incarnation. Why that is enough for
 * monotonicity and uniqueness is argued in `attempt.ts`; the incarnation check keeps a slow repair
 * computed for one loss from being applied after a second loss of the same node.
 * @module
 */
import type { Clock } from "../base/clock.js";
import type { NodeOutcome, NodeOutcomeKind } from "../base/report.js";
import { fanOut, type TaskContext } from "../core/fanout.js";
import { randomToken } from "../core/token.js";
import type { RedisNode } from "../transport/rest.js";
import type { FencingKeys } from "./keys.js";
import { fenceQuarantineOnNode, fenceReadOnNode, fenceRepairOnNode, outcomeOf } from "./node-operations.js";
import type { FenceReply } from "./replies.js";

/** What the background maintenance of one attempt did. */
export interface MaintenanceReport {
  /** Nodes this client put in quarantine (they had no marker while another node had one). */
  readonly quarantined: readonly string[];
  /** Nodes this client repaired for the attempt's resources. */
  readonly repaired: readonly string[];
  /** Every maintenance request's outcome: quarantines, the repair read, repairs. */
  readonly nodes: readonly NodeOutcome[];
  /** Requests sent (Workers subrequests). */
  readonly requests: number;
}

/** Options of {@link maintainNodes}. */
export interface MaintenanceOptions {
  readonly nodes: readonly RedisNode[];
  readonly keys: FencingKeys;
  readonly resources: readonly string[];
  /** Phase 1's per-node outcomes (the fan-out's `outcomes`). */
  readonly phase1: readonly Promise<NodeOutcome>[];
  /** Phase 1's validated replies, filled in as they arrive. */
  readonly replies: readonly (FenceReply | undefined)[];
  readonly quorum: number;
  readonly requestTimeoutMs: number;
  readonly quarantineMs: number;
  readonly clock: Clock;
}

const HAS_MARKER: readonly NodeOutcomeKind[] = ["acquired", "held", "quarantined", "needs-repair"];

/** Quarantine the lost nodes and repair the recovering ones that phase 1 found. Never rejects. */
export async function maintainNodes(options: MaintenanceOptions): Promise<MaintenanceReport> {
  const report = { quarantined: [] as string[], repaired: [] as string[], nodes: [] as NodeOutcome[], requests: 0 };
  try {
    const phase1 = await Promise.all(options.phase1);
    const markerSeen = phase1.some((o) => HAS_MARKER.includes(o.outcome));
    const lost = indicesWith(phase1, "no-marker");
    if (markerSeen && lost.length > 0) await quarantine(options, lost, report);
    const recovering = indicesWith(phase1, "needs-repair");
    if (recovering.length > 0) await repair(options, recovering, report);
  } catch (error) {
    // Maintenance is best effort: a failure here leaves nodes out, which is safe.
    report.nodes.push({ node: "maintenance", outcome: "error", requests: 0, error: asError(error) });
  }
  return report;
}

type MutableReport = { quarantined: string[]; repaired: string[]; nodes: NodeOutcome[]; requests: number };

/**
 * Run `work` on the nodes at `indices`, each on its own (no vote), record every outcome, and
 * return the ids of the nodes that answered `yes`.
 */
async function onEach(
  options: MaintenanceOptions,
  indices: readonly number[],
  report: MutableReport,
  yes: NodeOutcomeKind,
  work: (index: number, context: TaskContext) => Promise<NodeOutcomeKind>,
): Promise<string[]> {
  const outcomes = await fanOut({
    nodeIds: indices.map((i) => nodeAt(options, i).id),
    yes,
    quorum: 1,
    timeoutMs: options.requestTimeoutMs,
    clock: options.clock,
    task: (j, context) => work(indices[j] as number, context),
  }).outcomes;
  record(report, outcomes);
  return outcomes.filter((o) => o.outcome === yes).map((o) => o.node);
}

async function quarantine(options: MaintenanceOptions, indices: readonly number[], report: MutableReport) {
  const quarantined = await onEach(options, indices, report, "quarantined", async (index, context) =>
    outcomeOf(
      await fenceQuarantineOnNode(nodeAt(options, index), options.keys, randomToken(), options.quarantineMs, context),
    ),
  );
  report.quarantined.push(...quarantined);
}

async function repair(options: MaintenanceOptions, indices: readonly number[], report: MutableReport) {
  // The read starts only now, after every NEEDS_REPAIR answer arrived: see (3) in attempt.ts.
  const { nodes, keys, resources } = options;
  const reads: (FenceReply | undefined)[] = nodes.map(() => undefined);
  const read = fanOut({
    nodeIds: nodes.map((n) => n.id),
    yes: "verified",
    quorum: options.quorum,
    timeoutMs: options.requestTimeoutMs,
    clock: options.clock,
    task: async (i, context) => {
      const reply = await fenceReadOnNode(nodeAt(options, i), keys, resources, context);
      reads[i] = reply;
      return outcomeOf(reply, "verified");
    },
  });
  const decided = await read.decided;
  record(report, decided.outcomes);
  if (!decided.granted) return; // fewer than a quorum of healthy nodes: nothing sound to copy
  const floor = Math.max(
    0,
    ...decided.outcomes.flatMap((o, i) => (o.outcome === "verified" ? [(reads[i] as FenceReply).fence] : [])),
  );
  const repaired = await onEach(options, indices, report, "repaired", async (index, context) => {
    const incarnation = (options.replies[index] as FenceReply).incarnation;
    return outcomeOf(await fenceRepairOnNode(nodeAt(options, index), keys, incarnation, floor, resources, context));
  });
  report.repaired.push(...repaired);
}

function record(report: MutableReport, outcomes: readonly NodeOutcome[]): void {
  report.nodes.push(...outcomes);
  report.requests += outcomes.reduce((sum, o) => sum + o.requests, 0);
}

function indicesWith(outcomes: readonly NodeOutcome[], kind: NodeOutcomeKind): number[] {
  return outcomes.flatMap((o, i) => (o.outcome === kind ? [i] : []));
}

function nodeAt(options: MaintenanceOptions, index: number): RedisNode {
  return options.nodes[index] as RedisNode;
}

function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
