/**
 * Tests that pause, delay or restart nodes start their own: five fresh nodes for the calling
 * file, every delay lifted after each test, everything stopped at the end.
 */
import { afterAll, afterEach, beforeAll } from "vitest";
import { type NodeCluster, startNodes } from "../../../tools/nodes/index.js";

/** Start 5 nodes for the calling test file; the getter returns them once started. */
export function useOwnCluster(): () => NodeCluster {
  let cluster: NodeCluster | undefined;
  beforeAll(async () => {
    cluster = await startNodes({ count: 5 });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  afterEach(() => {
    for (let i = 0; i < 5; i++) cluster?.setDelay(i, 0);
  });
  return () => {
    if (!cluster) throw new Error("the nodes are not started yet");
    return cluster;
  };
}
