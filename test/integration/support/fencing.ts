/** Helpers shared by the fencing integration tests. */
import { fanOut } from "../../../src/core/fanout.js";
import { releaseOnNode } from "../../../src/core/node-operations.js";
import type { RedisNode } from "../../../src/transport/rest.js";

/** Release `token` on every node (compare-and-delete), each with its own deadline. */
export async function releaseEverywhere(
  nodes: readonly RedisNode[],
  lockKeys: readonly string[],
  token: string,
): Promise<void> {
  const fan = fanOut({
    nodeIds: nodes.map((n) => n.id),
    yes: "released",
    quorum: 1,
    timeoutMs: 2000,
    clock: { now: () => performance.now() },
    task: (i, context) => releaseOnNode(nodes[i] as RedisNode, lockKeys, token, context),
  });
  await fan.outcomes;
}

/** One grant as the concurrency test records it: its place in the grant order, and its fence. */
export interface OrderedGrant {
  /** Value of a counter incremented under the lock (1 for the first grant, 2 for the next...). */
  readonly order: number;
  readonly fence: string;
}

/**
 * Pairs of consecutive grants (in grant order) whose fences do not strictly increase, plus
 * duplicate orders. Empty when the history is right.
 */
export function fenceOrderViolations(grants: readonly OrderedGrant[]): string[] {
  const sorted = [...grants].sort((a, b) => a.order - b.order);
  const problems: string[] = [];
  for (let i = 1; i < sorted.length; i++) {
    const [before, after] = [sorted[i - 1] as OrderedGrant, sorted[i] as OrderedGrant];
    if (after.order === before.order) problems.push(`order ${after.order} granted twice`);
    if (!(BigInt(after.fence) > BigInt(before.fence))) {
      problems.push(`grant ${after.order} got fence ${after.fence}, not above grant ${before.order}'s ${before.fence}`);
    }
  }
  return problems;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The p-th percentile (0..100) of `values`. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}
