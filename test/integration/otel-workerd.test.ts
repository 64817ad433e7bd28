/**
 * `edge-redlock/otel` in workerd: the library, `@opentelemetry/api` and the SDK bundled into a
 * plain Worker (no compatibility flags, so no Node.js API) run against the real local nodes and a
 * dead one, and the metrics and spans it reads back are the documented ones.
 */
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Point } from "../support/otel.js";
import { uniqueKey } from "./support/nodes.js";

/** Not newer than the workerd that wrangler 4.86 / miniflare ship (2026-05-03). */
const COMPATIBILITY_DATE = "2026-05-01";

interface WorkerAnswer {
  heldWhileLocked: Point[];
  points: Point[];
  spans: {
    name: string;
    attributes: Record<string, unknown>;
    events: { name: string; attributes?: Record<string, unknown> }[];
    links: number;
  }[];
  token: string;
}

describe("edge-redlock/otel in workerd", () => {
  let mf: Miniflare;

  beforeAll(async () => {
    const bundle = await build({
      entryPoints: [new URL("./support/otel-worker.ts", import.meta.url).pathname],
      bundle: true,
      format: "esm",
      // The SDK's browser build: what a Worker's bundler picks (the "browser" field and conditions).
      platform: "browser",
      conditions: ["workerd", "worker", "browser"],
      target: "es2022",
      write: false,
      logLevel: "silent",
    });
    mf = new Miniflare({
      modules: true,
      script: (bundle.outputFiles[0] as { text: string }).text,
      compatibilityDate: COMPATIBILITY_DATE,
    });
    await mf.ready;
  }, 60_000);
  afterAll(async () => {
    await mf?.dispose();
  });

  it("acquire and release with one node down: metrics and spans as documented, no secret in them", async () => {
    const live = inject("nodes").slice(0, 4);
    // Port 9 (discard) on loopback: nothing listens, every request is refused at once.
    const nodes = [...live, { url: "http://127.0.0.1:9", token: "dead-node-token" }].map((n, i) => ({
      ...n,
      id: `node-${i + 1}`,
    }));
    const key = uniqueKey("otel-workerd");
    const response = await mf.dispatchFetch("http://worker/", {
      method: "POST",
      body: JSON.stringify({ nodes, key }),
    });
    expect(response.status).toBe(200);
    const answer = (await response.json()) as WorkerAnswer;
    const sum = (points: Point[], name: string, match: Record<string, unknown> = {}) =>
      points
        .filter((p) => p.name === name && Object.entries(match).every(([k, v]) => p.attributes[k] === v))
        .reduce((total, p) => total + (typeof p.value === "number" ? p.value : p.value.count), 0);

    expect(sum(answer.heldWhileLocked, "edge_redlock.lock.held")).toBe(1);
    const { points } = answer;
    expect(sum(points, "edge_redlock.acquire.duration", { "edge_redlock.outcome": "acquired" })).toBe(1);
    expect(sum(points, "edge_redlock.lock.held")).toBe(0);
    expect(sum(points, "edge_redlock.lock.hold.duration", { "edge_redlock.hold.end": "released" })).toBe(1);
    const dead = { "edge_redlock.operation": "acquire", "edge_redlock.node": "node-5" };
    expect(sum(points, "edge_redlock.node.requests", { ...dead, "edge_redlock.node.outcome": "error" })).toBe(1);
    expect(sum(points, "edge_redlock.node.requests", dead)).toBe(1);
    expect(sum(points, "edge_redlock.node.requests", { "edge_redlock.operation": "acquire" })).toBe(5);

    expect(answer.spans.map((s) => s.name)).toEqual(["edge_redlock.acquire", "edge_redlock.release"]);
    const [acquire, release] = answer.spans;
    expect(acquire?.attributes).toMatchObject({
      "edge_redlock.outcome": "acquired",
      "edge_redlock.quorum": 3,
      "edge_redlock.node_count": 5,
      "edge_redlock.attempts": 1,
    });
    const answers = acquire?.events.filter((e) => e.name === "edge_redlock.node_answer") ?? [];
    expect(answers.map((e) => e.attributes?.["edge_redlock.node"])).toEqual(nodes.map((n) => n.id));
    expect(answers[4]?.attributes?.["edge_redlock.node.outcome"]).toBe("error");
    expect(release?.links).toBe(1);

    const text = JSON.stringify({ points, spans: answer.spans });
    for (const secret of [answer.token, key, ...nodes.map((n) => n.token)]) expect(text).not.toContain(secret);
  });
});
