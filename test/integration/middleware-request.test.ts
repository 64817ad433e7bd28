/**
 * The Hono middleware's 409 and 503 paths in workerd (issue 30): a failed acquisition leaves
 * background work (leaving the gate's line, cleanup of its attempts) that must finish inside its
 * own request, through `waitUntil`. Otherwise workerd cancels it with the request's I/O, and a
 * later request's `settled()` finds it abandoned, with a warning that a promise was settled from
 * another request's context.
 */
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { bundleWorker } from "../../tools/demo/bundle.js";
import { raw, uniqueKey } from "./support/nodes.js";

const COMPATIBILITY_DATE = "2026-05-01";
const CROSS_REQUEST = /different request|request context/i;

async function startWorker(nodes: readonly { url: string; token: string }[], output: string[]) {
  const mf = new Miniflare({
    modules: true,
    script: await bundleWorker(fileURLToPath(new URL("./support/middleware-worker.ts", import.meta.url))),
    compatibilityDate: COMPATIBILITY_DATE,
    bindings: { NODES: JSON.stringify(nodes) },
    host: "127.0.0.1",
    port: 0,
    handleRuntimeStdio(stdout, stderr) {
      stdout.on("data", (chunk) => output.push(String(chunk)));
      stderr.on("data", (chunk) => output.push(String(chunk)));
    },
  });
  return { mf, base: String(await mf.ready).replace(/\/$/, "") };
}

describe("withLock's failure paths in workerd", () => {
  const output: string[] = [];
  let mf: Miniflare;
  let base: string;
  const nodes = () => inject("nodes").map(({ url, token }) => ({ url, token }));

  beforeAll(async () => {
    ({ mf, base } = await startWorker(nodes(), output));
  });
  afterAll(async () => {
    await mf?.dispose();
  });

  /** Three requests at once while the lock is held elsewhere, then what `settled()` reports. */
  async function threeRefusals(path: string): Promise<{ statuses: number[]; abandoned: number; warnings: number }> {
    const key = uniqueKey("middleware");
    for (const node of nodes()) await raw(node, "SET", key, "another-holder", "PX", 30_000);
    const before = output.length;
    const answers = await Promise.all(
      [0, 1, 2].map(() => fetch(`${base}/${path}/${encodeURIComponent(key)}`, { method: "POST" })),
    );
    for (const answer of answers) await answer.text();
    const settled = (await (await fetch(`${base}/settled`)).json()) as { abandoned: number };
    return {
      statuses: answers.map((a) => a.status),
      abandoned: settled.abandoned,
      warnings: output.slice(before).filter((line) => CROSS_REQUEST.test(line)).length,
    };
  }

  it("409: the background work of the refused requests finishes in them", async () => {
    const result = await threeRefusals("locked");
    expect(result.statuses).toEqual([409, 409, 409]);
    expect(result.abandoned).toBe(0);
    expect(result.warnings).toBe(0);
  }, 60_000);

  it("negative control: the same refusals without waitUntil leave work behind", async () => {
    const result = await threeRefusals("bare");
    expect(result.statuses).toEqual([409, 409, 409]);
    expect(result.abandoned + result.warnings).toBeGreaterThan(0);
  }, 60_000);
});

describe("withLock's 503 in workerd", () => {
  it("nodes down: 503 with Retry-After, and nothing left behind", async () => {
    const output: string[] = [];
    // Loopback ports nobody listens on: every request is refused at once.
    const down = [1, 2, 3].map((i) => ({ url: `http://127.0.0.1:${i}`, token: "t" }));
    const { mf, base } = await startWorker(down, output);
    try {
      const answers = await Promise.all([0, 1, 2].map(() => fetch(`${base}/locked/down`, { method: "POST" })));
      for (const answer of answers) {
        expect(answer.status).toBe(503);
        expect(answer.headers.get("retry-after")).toBe("1");
        await answer.text();
      }
      const settled = (await (await fetch(`${base}/settled`)).json()) as { abandoned: number };
      expect(settled.abandoned).toBe(0);
      expect(output.filter((line) => CROSS_REQUEST.test(line))).toEqual([]);
    } finally {
      await mf.dispose();
    }
  }, 60_000);
});
