/**
 * vitest globalSetup: provides `deadUrl`, a loopback URL where nothing listens (a port that was
 * just bound and closed again), so a request to it is refused at once: a dead node.
 */
import { createServer } from "node:net";
import type { TestProject } from "vitest/node";

export default async function setup(project: TestProject): Promise<void> {
  const server = createServer();
  const port = await new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") reject(new Error("no port"));
      else resolve(address.port);
    });
  });
  await new Promise<void>((resolve) => server.close(() => resolve()));
  project.provide("deadUrl", `http://127.0.0.1:${port}`);
}
