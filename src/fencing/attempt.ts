/**
 * One fenced acquisition attempt over N nodes: phase 1 (lock + read), phase 2 (ownership-checked
 * CAS ratchet, retried with a higher proposal when outbid), and, off the critical path, the
 * quarantine of nodes found without their marker and the repair of recovered ones.
 *
 * Cost, uncontended: 2 round trips and at most 2N requests (Workers subrequests): N for phase 1,
 * then one per node that granted phase 1 (phase 2 asks no other node), so 2N when every node is
 * up and free, plus one per node for the first `NOSCRIPT` after a restart. Plain Redlock needs 1 round
 * trip and N requests. Each phase-2 retry (only when concurrent proposers raised the counters)
 * adds a round trip. Maintenance, only after a node lost its data, runs off the critical path:
 * one request per lost node for its quarantine, then one read round (N) plus one request per
 * node for each repair.
 *
 * ## Why the token is unique and monotonic (safety.md §B.3, restated for this code)
 *
 * Let q be the quorum, with 2q - N ≥ f + 1 where f bounds the nodes that may *silently* lose
 * recent writes (`fencingQuorum`). On a node that does not forget, a counter never decreases: only
 * phase 2 and repair write it, both only upward (`F < t` then `F := t`; `F := max(F, m)`).
 *
 * - Monotonicity (grant A returned before attempt B began ⇒ tB > tA): A's phase 2 was ACKed by a
 *   set W_A of q nodes, each then holding F ≥ tA. B's phase-1 OK replies come from a set R_B of q
 *   nodes, read after B began, so after A's writes. |W_A ∩ R_B| ≥ 2q - N ≥ f + 1, so some member
 *   remembers and B read F ≥ tA there; tB = 1 + max ≥ tA + 1. A phase-2 retry only raises tB.
 * - Uniqueness: a node ACKs a given value at most once (after the ACK, `F < t` is false). Two
 *   grants committing the same t would need two ACK sets of q nodes, which share f + 1 nodes, one
 *   of which does not forget and would have ACKed t twice.
 * Neither argument involves clocks, TTLs or pauses: both hold when the lock itself fails.
 *
 * ## Nodes that lose everything (detected by the missing marker): quarantine and repair
 *
 * A node that restarts empty has no incarnation marker; every script refuses to grant or ACK on
 * it (`NO_MARKER`). A client that sees it quarantines it (`maintenance.ts`); after the quarantine
 * it answers `NEEDS_REPAIR` for every resource until a client restores that resource's counter
 * from a quorum read. That keeps both properties with plain majority quorums, under the same
 * timing assumption as Redlock's own "delayed restart" (server clocks advance at about the same
 * rate), because of three details of this module:
 *
 * 1. Phase 2 goes only to the nodes that answered phase 1 with OK, so a node's lock key for this
 *    attempt was set (with PX ttl) before any phase-2 request of the attempt left the client.
 * 2. Phase 2 is ownership-checked, so a phase-2 write lands on node a only while a still holds
 *    our lock key: no later than ttl after our phase 1 executed there. (Extensions come only
 *    after the grant, when no phase-2 write of this attempt is outstanding any more.)
 * 3. The quarantine lasts at least ttl plus drift (`assertQuarantineCovers`) from the moment the
 *    loss was detected, and the repair reads the healthy nodes only after receiving the lost
 *    node's NEEDS_REPAIR answer, i.e. after its quarantine ended.
 *
 * Now take any attempt A that counted an ACK from node i's old incarnation. Its phase 1 on every
 * other node a of its ACK set executed before that ACK (1), which preceded the loss, which
 * preceded the quarantine. By (2) A's phase-2 write on a landed, if ever, within ttl of its phase
 * 1 there, so before the quarantine ended (3), so before the repair read a. A repair read of q
 * healthy nodes meets the q - 1 surviving members of W_A (2q > N, among N - 1 nodes), hence it
 * repairs i to at least tA. Nodes still lost or unrepaired appear in no read and no ACK set, so
 * with k of them the survivors (≥ q - k) still meet any read quorum of the N - k healthy nodes.
 * Without (1) a straggling phase-1 SET could arm a's key late and let A's write land after the
 * repair read; without the quarantine, a repair could read a before A's write arrives: either
 * way the repaired node could hold a counter below tA and later be the only member of a read
 * quorum that A's ACK set meets. The property tests exercise both.
 *
 * Silent partial loss (the marker survives, recent writes vanish) is not detectable; it is what
 * `faultTolerance` (f) sizes the quorum for.
 * @module
 */
import type { Clock } from "../base/clock.js";
import type { NodeOutcome } from "../base/report.js";
import { type Decided, type FanOut, fanOut, type RequestMeter, type TaskContext } from "../core/fanout.js";
import type { RedisNode } from "../transport/rest.js";
import { proposeFence, raiseFence } from "./arithmetic.js";
import { type FencingKeys, fencingKeys } from "./keys.js";
import { type MaintenanceReport, maintainNodes } from "./maintenance.js";
import { fenceAcquireOnNode, fenceRatchetOnNode, outcomeOf } from "./node-operations.js";
import type { FenceReply } from "./replies.js";

/** Options of {@link fencedAttempt}. */
export interface FencedAttemptOptions {
  readonly nodes: readonly RedisNode[];
  /** The lock keys are `keyPrefix + resource`, exactly as for a plain lock. */
  readonly keyPrefix: string;
  /** The lock's resources, validated and sorted, none reserved (see `isReservedResource`). */
  readonly resources: readonly string[];
  /** The lock token (nonce). */
  readonly token: string;
  readonly ttlMs: number;
  /** Votes needed in each phase (see `fencingQuorum`). */
  readonly quorum: number;
  /** Deadline of each node request, in milliseconds. */
  readonly requestTimeoutMs: number;
  /** How long a node found without its marker is quarantined (see `assertQuarantineCovers`). */
  readonly quarantineMs: number;
  readonly clock: Clock;
  /** Aborts the attempt's requests (not the background maintenance). */
  readonly signal?: AbortSignal | undefined;
  /** Counts the attempt's requests for the call's request budget. */
  readonly meter?: RequestMeter | undefined;
  /** Phase-2 rounds at most (the first included). @default 3 */
  readonly maxRatchetRounds?: number | undefined;
  /**
   * Clock reading after which no further phase-2 round starts (a grant after it would have no
   * validity left anyway). @default startedAt + ttlMs
   */
  readonly deadline?: number | undefined;
  /**
   * Phase 1 on one node, for a lock of another kind whose keys are still `keyPrefix + resource`
   * (a read-write lock's write key): it must answer as `fence-acquire` does (health first; on `OK`
   * every such key holds the token with PX ttl; the counters read on `OK` and `BUSY`), so the
   * arguments above hold unchanged. @default `fence-acquire` on the lock keys
   */
  readonly phase1?: ((node: RedisNode, keys: FencingKeys, context: TaskContext) => Promise<FenceReply>) | undefined;
}

/** One phase (or phase-2 round) of a fenced attempt. */
export interface FencePhaseReport {
  readonly phase: "acquire" | "ratchet";
  /** The proposed fence (phase 2 only). */
  readonly fence?: string;
  /** Every node's outcome when the phase was decided; phase 2 lists only the nodes it asked. */
  readonly nodes: readonly NodeOutcome[];
  readonly requests: number;
}

/** Why a fenced attempt failed. */
export type FencedRefusal =
  /** Other tokens hold the lock on enough nodes that phase 1 could not reach a quorum. */
  | "held"
  /** Errors, timeouts, quarantined or unrepaired nodes left too few for a quorum. */
  | "unavailable"
  /** Every node answered without an incarnation marker: the deployment needs `initializeFencing`. */
  | "uninitialized"
  /** Phase 2 kept meeting higher counters (concurrent proposers) until its rounds or time ran out. */
  | "outbid"
  /** Between the phases our keys expired or were lost on too many nodes. */
  | "lost"
  /** The caller's signal aborted. */
  | "aborted";

/** The result of {@link fencedAttempt}. */
export interface FencedAttemptResult {
  readonly granted: boolean;
  /** The fence token (a canonical decimal integer below 2^53), when granted. */
  readonly fence?: string;
  /** Clock reading immediately before phase 1's first send: validity is measured from here. */
  readonly startedAt: number;
  /** Clock reading when the last phase was decided: `validity = ttl - (decidedAt - startedAt) - drift`. */
  readonly decidedAt: number;
  readonly phases: readonly FencePhaseReport[];
  /** Requests sent by the phases (Workers subrequests), not counting maintenance. */
  readonly requests: number;
  readonly reason?: FencedRefusal;
  /**
   * Phase 1's fan-out, whose requests set the lock keys: its nodes' final outcomes and when each
   * request finished (also after the vote). On failure, and after a release, the caller cleans
   * up after the requests whose fate was unknown.
   */
  readonly acquireFan: FanOut;
  /**
   * Quarantine and repair of nodes found lost or recovering, run off the critical path. Never
   * rejects. Await it (or hand it to `waitUntil`) before retrying after a failure, so the next
   * attempt can count the repaired nodes.
   */
  readonly maintenance: Promise<MaintenanceReport>;
}

const DEFAULT_RATCHET_ROUNDS = 3;

/**
 * Run one fenced attempt. It never throws for node failures (they are outcomes); it leaves the
 * keys of a failed attempt for the caller to release, like a plain attempt.
 */
export async function fencedAttempt(options: FencedAttemptOptions): Promise<FencedAttemptResult> {
  const { nodes, resources, token, ttlMs, quorum, clock } = options;
  const keys = fencingKeys(options.keyPrefix);
  const lockKeys = resources.map((r) => options.keyPrefix + r);
  const nodeIds = nodes.map((n) => n.id);
  const phase1Replies: (FenceReply | undefined)[] = nodes.map(() => undefined);

  const phase1 = fanOut({
    nodeIds,
    yes: "acquired",
    quorum,
    timeoutMs: options.requestTimeoutMs,
    signal: options.signal,
    meter: options.meter,
    clock,
    task: async (i, context) => {
      const node = nodeAt(nodes, i);
      const reply = options.phase1
        ? await options.phase1(node, keys, context)
        : await fenceAcquireOnNode(node, keys, lockKeys, resources, token, ttlMs, context);
      phase1Replies[i] = reply;
      return outcomeOf(reply);
    },
  });
  const startedAt = phase1.startedAt;
  const maintenance = maintainNodes({
    nodes,
    keys,
    resources,
    phase1: nodes.map((_, i) => phase1.outcomeOf(i)),
    replies: phase1Replies,
    quorum,
    requestTimeoutMs: options.requestTimeoutMs,
    quarantineMs: options.quarantineMs,
    clock,
  });
  const decided1 = await phase1.decided;
  const phases: FencePhaseReport[] = [{ phase: "acquire", nodes: decided1.outcomes, requests: decided1.requests }];
  let requests = decided1.requests;
  const result = (granted: boolean, decidedAt: number, extra: { fence?: string; reason?: FencedRefusal }) => ({
    granted,
    startedAt,
    decidedAt,
    phases,
    requests,
    acquireFan: phase1,
    maintenance,
    ...extra,
  });

  if (!decided1.granted) {
    return result(false, decided1.decidedAt, {
      reason: await phase1Refusal(decided1, phase1.outcomes, quorum, options.signal),
    });
  }

  // Only the nodes that answered OK by the decision: see (1) in the module comment. Their replies,
  // with the BUSY ones, were all read after this attempt began; the OK ones alone are a quorum.
  const granting = decided1.outcomes.flatMap((o, i) => (o.outcome === "acquired" ? [i] : []));
  const readFences = decided1.outcomes.flatMap((o, i) => {
    const reply = phase1Replies[i];
    return (o.outcome === "acquired" || o.outcome === "held") && reply ? [reply.fence] : [];
  });
  let fence = proposeFence(readFences);
  const rounds = options.maxRatchetRounds ?? DEFAULT_RATCHET_ROUNDS;
  const deadline = options.deadline ?? startedAt + ttlMs;

  for (let round = 1; ; round++) {
    const proposal = fence;
    const phase2Replies: (FenceReply | undefined)[] = granting.map(() => undefined);
    const phase2 = fanOut({
      nodeIds: granting.map((i) => nodeIds[i] as string),
      yes: "fenced",
      quorum,
      timeoutMs: options.requestTimeoutMs,
      signal: options.signal,
      meter: options.meter,
      clock,
      task: async (j, context) => {
        const node = nodeAt(nodes, granting[j] as number);
        const reply = await fenceRatchetOnNode(node, keys, lockKeys, resources, token, proposal, context);
        phase2Replies[j] = reply;
        return outcomeOf(reply);
      },
    });
    const decided2 = await phase2.decided;
    requests += decided2.requests;
    phases.push({ phase: "ratchet", fence: String(proposal), nodes: decided2.outcomes, requests: decided2.requests });
    if (decided2.granted) return result(true, decided2.decidedAt, { fence: String(proposal) });

    if (options.signal?.aborted) return result(false, decided2.decidedAt, { reason: "aborted" });
    const outbidBy = decided2.outcomes.flatMap((o, j) => {
      const reply = phase2Replies[j];
      return o.outcome === "outbid" && reply ? [reply.fence] : [];
    });
    // Nodes that refused for any other reason (keys lost, unhealthy, errors) will not ACK a higher
    // proposal either; another round helps only if the outbid ones can still make a quorum.
    const canStillAck = decided2.outcomes.filter((o) => ["outbid", "fenced", "pending"].includes(o.outcome)).length;
    if (outbidBy.length === 0 || canStillAck < quorum) {
      const lost = decided2.outcomes.filter((o) => o.outcome === "held").length;
      return result(false, decided2.decidedAt, { reason: granting.length - lost < quorum ? "lost" : "unavailable" });
    }
    if (round >= rounds || clock.now() >= deadline) {
      return result(false, decided2.decidedAt, { reason: "outbid" });
    }
    fence = raiseFence(proposal, outbidBy);
  }
}

/** Why phase 1 failed; waits for every node only to tell an uninitialised deployment apart. */
async function phase1Refusal(
  decided: Decided,
  outcomes: Promise<readonly NodeOutcome[]>,
  quorum: number,
  signal: AbortSignal | undefined,
): Promise<FencedRefusal> {
  if (signal?.aborted) return "aborted";
  const held = decided.outcomes.filter((o) => o.outcome === "held").length;
  if (decided.outcomes.length - held < quorum) return "held";
  const seenMarker = decided.outcomes.some((o) => o.outcome !== "no-marker" && markerKnown(o));
  if (seenMarker) return "unavailable";
  // No answer so far showed a marker: wait for the rest (bounded by the request deadline). Only
  // when every node answered NO_MARKER is the deployment uninitialised; a node that did not answer
  // may be an initialised one that is down.
  const all = await outcomes;
  return all.every((o) => o.outcome === "no-marker") ? "uninitialized" : "unavailable";
}

/** Whether an outcome proves the node has a marker (any script answer other than NO_MARKER). */
function markerKnown(outcome: NodeOutcome): boolean {
  return ["acquired", "held", "quarantined", "needs-repair"].includes(outcome.outcome);
}

function nodeAt(nodes: readonly RedisNode[], index: number): RedisNode {
  return nodes[index] as RedisNode;
}
