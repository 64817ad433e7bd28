/**
 * The fencing arithmetic: quorum size for a tolerated number of forgetful nodes, the proposed
 * token and its raise after a refusal, and the quarantine length. Pure functions, no I/O.
 * @module
 */
import { InvalidArgumentError } from "../base/errors.js";
import { MAX_FENCE } from "./lua.js";

/**
 * The quorum that tolerates `faultTolerance` nodes *silently* losing recent writes (a failover
 * under asynchronous replication, a restore from an older snapshot): `floor((N + f) / 2) + 1`.
 * Any two such quorums share at least `f + 1` nodes, so at least one of them remembers
 * (safety.md §B.3, §B.5). With `quorum` given too, the larger of the two wins: the result is
 * never below a majority and never above N.
 * @throws {InvalidArgumentError} when `f` is not an integer in [0, N - 1], or `quorum` is below
 * a majority or above N.
 */
export function fencingQuorum(nodeCount: number, faultTolerance = 0, quorum?: number): number {
  if (!Number.isInteger(nodeCount) || nodeCount < 1) {
    throw new InvalidArgumentError(`the node count must be a positive integer, got ${nodeCount}`);
  }
  if (!Number.isInteger(faultTolerance) || faultTolerance < 0 || faultTolerance > nodeCount - 1) {
    throw new InvalidArgumentError(
      `faultTolerance must be an integer from 0 to ${nodeCount - 1} (one less than the ${nodeCount} nodes), got ${faultTolerance}`,
    );
  }
  const majority = Math.floor(nodeCount / 2) + 1;
  if (quorum !== undefined && (!Number.isInteger(quorum) || quorum < majority || quorum > nodeCount)) {
    throw new InvalidArgumentError(
      `quorum must be an integer from ${majority} (a majority of ${nodeCount} nodes) to ${nodeCount}, got ${quorum}`,
    );
  }
  const sized = Math.floor((nodeCount + faultTolerance) / 2) + 1;
  return Math.min(nodeCount, Math.max(sized, quorum ?? majority));
}

/**
 * The token to propose after phase 1: one more than the highest counter read. `fences` must
 * include every OK reply of a quorum (BUSY replies may be added: a higher proposal is harmless).
 * @throws {RangeError} when the counters have reached 2^53 - 1 (no larger exact integer exists).
 */
export function proposeFence(fences: readonly number[]): number {
  return next(Math.max(0, ...fences));
}

/**
 * The proposal for another phase-2 round after some nodes refused: one more than the highest of
 * the previous proposal and the counters they reported.
 */
export function raiseFence(previous: number, refusedWith: readonly number[]): number {
  return next(Math.max(previous, ...refusedWith));
}

function next(highest: number): number {
  if (highest >= MAX_FENCE) throw new RangeError("fence counter exhausted (2^53 - 1)");
  return highest + 1;
}

/**
 * Check that a quarantine outlasts every lock key a lost node could have held: the quarantine
 * must be at least the lock's TTL plus its drift allowance (`floor(ttl * driftFactor) + 2`), so
 * that, measured on another node's clock running at most `driftFactor` apart, every key set before
 * the loss has expired when the quarantine ends.
 * @throws {InvalidArgumentError} when it does not.
 */
export function assertQuarantineCovers(ttlMs: number, quarantineMs: number, driftFactor: number): void {
  const needed = ttlMs + Math.floor(ttlMs * driftFactor) + 2;
  if (!Number.isInteger(quarantineMs) || quarantineMs < needed) {
    throw new InvalidArgumentError(
      `quarantineMs (${quarantineMs}) must be at least the TTL plus its drift allowance (${needed}) for a fenced lock of ${ttlMs} ms`,
    );
  }
}
