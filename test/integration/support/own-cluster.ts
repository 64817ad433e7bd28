/**
 * Tests that pause, delay or restart nodes start their own: five fresh nodes for the calling
 * file, every delay lifted after each test, everything stopped at the end.
 */
import { afterAll, afterEach, beforeAll } from "vitest";
import { type NodeCluster, startNodes } from "../../../tools/nodes/index.js";
import type { Endpoint } from "./nodes.js";

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

/**
 * Three of five nodes of the calling file's own (see {@link useOwnCluster}), as `{ url, token }`
 * endpoints, filled in before its tests run: a client of three of the shared five would be a
 * cluster of another node list on them, which the nodes' cluster fingerprint refuses
 * (docs/deployments.md). Also the getter of the five, to pause, delay or restart them.
 */
export function useOwnThreeNodes(): { nodesOf: () => NodeCluster; endpoints: Endpoint[] } {
  const nodesOf = useOwnCluster();
  const endpoints: Endpoint[] = [];
  beforeAll(() => {
    endpoints.push(
      ...nodesOf()
        .nodes.slice(0, 3)
        .map(({ url, token }) => ({ url, token })),
    );
  });
  return { nodesOf, endpoints };
}
