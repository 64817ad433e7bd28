/**
 * What each fencing step sends to one node, and how its reply is read (strictly: see
 * `replies.ts`). One function per script; each returns the validated reply.
 * @module
 */
import { NodeError } from "../base/errors.js";
import type { NodeOutcomeKind } from "../base/report.js";
import type { TaskContext } from "../core/fanout.js";
import { runScript } from "../core/scripts/script.js";
import type { RedisNode } from "../transport/rest.js";
import { type FencingKeys, scriptKeys } from "./keys.js";
import { type FenceReply, parseFenceReply } from "./replies.js";
import { fenceAcquireScript } from "./scripts/fence-acquire.js";
import { fenceInitScript } from "./scripts/fence-init.js";
import { fenceQuarantineScript } from "./scripts/fence-quarantine.js";
import { fenceRatchetScript } from "./scripts/fence-ratchet.js";
import { fenceReadScript } from "./scripts/fence-read.js";
import { fenceRepairScript } from "./scripts/fence-repair.js";
import { fenceRwWriteScript } from "./scripts/fence-rw-write.js";

/** Phase 1: take the lock keys (all or none) and read the counters of `resources`. */
export async function fenceAcquireOnNode(
  node: RedisNode,
  keys: FencingKeys,
  lockKeys: readonly string[],
  resources: readonly string[],
  token: string,
  ttlMs: number,
  context: TaskContext,
): Promise<FenceReply> {
  const reply = await runScript(
    node,
    fenceAcquireScript,
    scriptKeys(keys, lockKeys),
    [token, ttlMs, ...resources],
    context,
  );
  return parseFenceReply(node.id, "fence-acquire", reply);
}

/**
 * Phase 1 of a read-write lock's write lock: take the write key where no writer holds it and no
 * reader's entry is live (else leave the writer's mark), and read the counter of `field`.
 * `rwKeys`: the write key, the readers' sorted set, the writer-waiting mark.
 */
export async function fenceRwWriteOnNode(
  node: RedisNode,
  keys: FencingKeys,
  rwKeys: readonly string[],
  field: string,
  token: string,
  ttlMs: number,
  writer: { readonly id: string; readonly ttlMs: number },
  context: TaskContext,
): Promise<FenceReply> {
  const reply = await runScript(
    node,
    fenceRwWriteScript,
    scriptKeys(keys, rwKeys),
    [token, ttlMs, writer.id, writer.ttlMs, field],
    context,
  );
  return parseFenceReply(node.id, "fence-rw-write", reply);
}

/** Phase 2: raise every counter of `resources` to `fence` if all are below it and we still own the keys. */
export async function fenceRatchetOnNode(
  node: RedisNode,
  keys: FencingKeys,
  lockKeys: readonly string[],
  resources: readonly string[],
  token: string,
  fence: number,
  context: TaskContext,
): Promise<FenceReply> {
  const proposed = String(fence);
  const reply = await runScript(
    node,
    fenceRatchetScript,
    scriptKeys(keys, lockKeys),
    [token, proposed, ...resources],
    context,
  );
  const parsed = parseFenceReply(node.id, "fence-ratchet", reply);
  // An ACK must echo the proposal; anything else is a confused node, not a vote.
  if (parsed.status === "ACK" && parsed.fence !== fence) {
    throw new NodeError(node.id, `fence-ratchet from ${node.id} acknowledged a different fence`);
  }
  if (parsed.status === "NACK" && parsed.fence < fence) {
    throw new NodeError(node.id, `fence-ratchet from ${node.id} refused with a lower counter`);
  }
  return parsed;
}

/** Read the highest counter of `resources` (none: only the node's health). Writes nothing. */
export async function fenceReadOnNode(
  node: RedisNode,
  keys: FencingKeys,
  resources: readonly string[],
  context: TaskContext,
): Promise<FenceReply> {
  const reply = await runScript(node, fenceReadScript, scriptKeys(keys), [...resources], context);
  return parseFenceReply(node.id, "fence-read", reply);
}

/** Repair a recovering node in incarnation `incarnation`: counters := max(counter, floor), stamp. */
export async function fenceRepairOnNode(
  node: RedisNode,
  keys: FencingKeys,
  incarnation: string,
  floor: number,
  resources: readonly string[],
  context: TaskContext,
): Promise<FenceReply> {
  const reply = await runScript(
    node,
    fenceRepairScript,
    scriptKeys(keys),
    [incarnation, String(floor), ...resources],
    context,
  );
  return parseFenceReply(node.id, "fence-repair", reply);
}

/** Quarantine a node without a marker under the fresh id `incarnation` for `quarantineMs`. */
export async function fenceQuarantineOnNode(
  node: RedisNode,
  keys: FencingKeys,
  incarnation: string,
  quarantineMs: number,
  context: TaskContext,
): Promise<FenceReply> {
  const reply = await runScript(
    node,
    fenceQuarantineScript,
    [keys.incarnation, keys.quarantine],
    [incarnation, quarantineMs],
    context,
  );
  return parseFenceReply(node.id, "fence-quarantine", reply);
}

/** Mark a fresh node `ok:<incarnation>` (one-time initialisation). */
export async function fenceInitOnNode(
  node: RedisNode,
  keys: FencingKeys,
  incarnation: string,
  context: TaskContext,
): Promise<FenceReply> {
  const reply = await runScript(node, fenceInitScript, [keys.incarnation], [incarnation], context);
  return parseFenceReply(node.id, "fence-init", reply);
}

/**
 * The outcome kind a fencing reply reports:
 * OK → `acquired` (phase 1) or `verified` (read); BUSY and LOST → `held`; ACK → `fenced`;
 * NACK → `outbid`; NO_MARKER → `no-marker`; QUARANTINED → `quarantined`; NEEDS_REPAIR →
 * `needs-repair`; REPAIRED → `repaired`; INITIALIZED → `initialized`; STALE and PRESENT →
 * `not-held` (someone else got there first: nothing was written).
 */
export function outcomeOf(reply: FenceReply, okMeans: "acquired" | "verified" = "acquired"): NodeOutcomeKind {
  switch (reply.status) {
    case "OK":
      return okMeans;
    case "BUSY":
    case "LOST":
      return "held";
    case "ACK":
      return "fenced";
    case "NACK":
      return "outbid";
    case "NO_MARKER":
      return "no-marker";
    case "QUARANTINED":
      return "quarantined";
    case "NEEDS_REPAIR":
      return "needs-repair";
    case "REPAIRED":
      return "repaired";
    case "INITIALIZED":
      return "initialized";
    case "STALE":
    case "PRESENT":
      return "not-held";
  }
}
