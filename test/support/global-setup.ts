/**
 * vitest globalSetup of the "integration" project: starts 5 local nodes (redis-server + REST
 * bridge each) once per run, provides their endpoints as `inject("nodes")`, and stops them at
 * teardown. Tests that kill, pause or flush a node start their own nodes with `startNodes`.
 */
import type { TestProject } from "vitest/node";
import { startNodes } from "../../tools/nodes/index.js";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cluster = await startNodes({ count: 5 });
  project.provide(
    "nodes",
    cluster.nodes.map(({ url, token }) => ({ url, token })),
  );
  return async () => {
    await cluster.stop();
  };
}
