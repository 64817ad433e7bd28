/**
 * `npm run size -- --modules`: each module's marginal cost in an entry. The costs must name the
 * modules a minimal Worker pulls in and no others (the plain preset has no waiting module, the
 * default entry has them), and add up to most of the entry's gzipped size and not more.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { byFolder, moduleCosts } from "../../tools/size/modules.js";
import { measure } from "../../tools/size/size.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("size per module", () => {
  it("the plain preset: the core's modules and no waiting, summing to at most the entry's size", async () => {
    const costs = await moduleCosts(ROOT, "edge-redlock-core.ts");
    const modules = costs.map((c) => c.module);
    expect(modules).toContain("src/core/redlock.ts");
    expect(modules).toContain("src/transport/rest.ts");
    expect(modules.filter((m) => m.startsWith("src/waiting/") || m.startsWith("src/fencing/"))).toEqual([]);
    for (const cost of costs) expect(cost.marginalGzipBytes).toBeGreaterThanOrEqual(0);
    const total = costs.reduce((sum, c) => sum + c.marginalGzipBytes, 0);
    const { gzippedBytes } = await measure("edge-redlock-core.ts");
    expect(total).toBeGreaterThan(gzippedBytes / 2);
    expect(total).toBeLessThanOrEqual(gzippedBytes * 1.05);
  });

  it("the default entry adds the waiting folder, and a folder sum is the sum of its modules", async () => {
    const costs = await moduleCosts(ROOT, "edge-redlock.ts");
    const folders = byFolder(costs);
    const waiting = costs.filter((c) => c.module.startsWith("src/waiting/"));
    expect(waiting.length).toBeGreaterThan(3);
    expect(folders.get("src/waiting")).toBe(waiting.reduce((sum, c) => sum + c.marginalGzipBytes, 0));
  });
});
