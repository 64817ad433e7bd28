/**
 * The README's Cloudflare Workers sample, as printed, running in workerd against the real local
 * nodes. 30 concurrent requests for the same invoice all get their turn (the default waiting).
 * While another holder keeps the lock past the waiting budget, every answer must be a 409 with
 * `Retry-After`, never an uncaught error (500). Negative control: the sample as it was before (no
 * error handling) does answer 500 under the same conditions.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, inject, it } from "vitest";
import { unstable_startWorker } from "wrangler";
import { extractSamples } from "../readme/samples.js";
import { raw } from "./support/nodes.js";

process.env.WRANGLER_SEND_METRICS = "false";
process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const WORK = `${ROOT}node_modules/.cache/edge-redlock-readme-worker-${process.pid}`;
const REQUESTS = 30;

/** The user's work. */
const CHARGE = `
async function charge({ signal }: { signal: AbortSignal }) {
  await new Promise((resolve) => setTimeout(resolve, 200));
  signal.throwIfAborted();
  return { charged: true };
}
`;

/** The Workers sample of the README before it handled errors (kept here as the negative control). */
const SAMPLE_WITHOUT_ERROR_HANDLING = `
import { Redlock } from "edge-redlock";

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext) {
    const redlock = new Redlock({ nodes: JSON.parse(env.REDLOCK_NODES) });
    const result = await redlock.using("invoice:42", 10_000, async (signal, lock) => {
      const check = await lock.verify();
      if (!check.held) throw new Error("lock lost");
      return charge({ signal });
    }, { waitUntil: (p) => ctx.waitUntil(p) });
    ctx.waitUntil(redlock.settled());
    return Response.json(result);
  },
};
`;

function workersSample(): string {
  const readme = readFileSync(`${ROOT}README.md`, "utf8");
  const samples = extractSamples(readme).filter((s) => s.code.includes("ExecutionContext"));
  expect(samples).toHaveLength(1);
  const sample = samples[0] as { code: string; context: string };
  // The hidden context declares `charge`; the worker needs a body for it.
  const context = sample.context.replace(/declare function charge\([^;]*;/, CHARGE);
  expect(context, "the hidden context declares charge").toContain(CHARGE);
  return `${context}\n${sample.code}`;
}

type Worker = Awaited<ReturnType<typeof unstable_startWorker>>;
const workers: Worker[] = [];

async function fire(source: string, name: string, resource: string): Promise<Response[]> {
  mkdirSync(WORK, { recursive: true });
  const entry = `${WORK}/${name}.ts`;
  // A resource of its own per run, so runs never contend with each other or other tests.
  writeFileSync(entry, source.replaceAll('"invoice:42"', JSON.stringify(resource)));
  const worker = await unstable_startWorker({
    name,
    entrypoint: entry,
    compatibilityDate: "2026-05-01",
    envFiles: [],
    bindings: { REDLOCK_NODES: { type: "plain_text", value: JSON.stringify(inject("nodes")) } },
    build: { alias: { "edge-redlock": `${ROOT}src/index.ts` } },
    dev: { server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: "none" },
  });
  workers.push(worker);
  await worker.ready;
  const url = String(await worker.url);
  return Promise.all(Array.from({ length: REQUESTS }, () => fetch(url, { method: "POST" })));
}

afterAll(async () => {
  for (const worker of workers) await worker.dispose();
  rmSync(WORK, { recursive: true, force: true });
});

/** Another holder keeps `resource` on every node for a minute: longer than any waiting budget. */
async function holdElsewhere(resource: string): Promise<void> {
  for (const node of inject("nodes")) await raw(node, "SET", resource, "another-holder", "PX", 60_000);
}

describe("the README's Workers sample (finding 10)", () => {
  it("30 concurrent requests for one invoice all get their turn: 200 each", async () => {
    const answers = await fire(workersSample(), "readme-sample", `readme:invoice:${process.pid}:${Date.now()}`);
    expect(answers.map((r) => r.status)).toEqual(Array(REQUESTS).fill(200));
  }, 180_000);

  it("while another holder keeps the lock, answers 409 + Retry-After, never 500", async () => {
    const resource = `readme:held-invoice:${process.pid}:${Date.now()}`;
    await holdElsewhere(resource);
    const answers = await fire(workersSample(), "readme-sample-held", resource);
    expect(answers.map((r) => r.status)).toEqual(Array(REQUESTS).fill(409));
    for (const response of answers) {
      expect(response.headers.get("retry-after")).toBe("1");
      expect(await response.json()).toEqual({ error: "LOCK_HELD" });
    }
  }, 180_000);

  it("negative control: without error handling the same conditions give 500s", async () => {
    const resource = `readme:old-invoice:${process.pid}:${Date.now()}`;
    await holdElsewhere(resource);
    const source = `${workersSample().split("import {")[0]}${SAMPLE_WITHOUT_ERROR_HANDLING}`;
    const answers = await fire(source, "readme-sample-old", resource);
    expect(answers.filter((r) => r.status === 500).length).toBeGreaterThan(0);
  }, 180_000);
});
