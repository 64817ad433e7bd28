/**
 * The portable suite in the Vercel Edge sandbox: edge-runtime's EdgeRuntime, the VM that Vercel's
 * tooling uses for Edge Functions, with Web APIs only. (vitest's own `edge-runtime` environment
 * leaks Node's Buffer and process into the test, so it could not catch a Node-only API.)
 * The built package and the suite are bundled with esbuild for the browser platform, then served
 * through a `fetch` listener; each case is one request.
 */
import { createRequire } from "node:module";
import { EdgeRuntime } from "edge-runtime";
import { build } from "esbuild";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { CASE_NAMES, type SuiteInput } from "../portable-suite.js";
import { NODE_ONLY_GLOBALS, type RunResult } from "../suite-handler.js";

const VERSION = (createRequire(import.meta.url)("edge-runtime/package.json") as { version: string }).version;
const input: SuiteInput = { nodes: inject("nodes"), deadUrl: inject("deadUrl"), runtime: "edge" };

let runtime: EdgeRuntime;

beforeAll(async () => {
  const bundle = await build({
    entryPoints: [new URL("entry.ts", import.meta.url).pathname],
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  runtime = new EdgeRuntime({ initialCode: bundle.outputFiles[0]!.text });
});

async function call(path: string, init?: RequestInit): Promise<Response> {
  const response = await runtime.dispatchFetch(`http://edge.local${path}`, init);
  await response.waitUntil();
  return response;
}

describe(`Vercel Edge sandbox (edge-runtime ${VERSION})`, () => {
  it("has no Node-only globals", async () => {
    for (const name of NODE_ONLY_GLOBALS) {
      expect(runtime.evaluate(`typeof ${name}`), name).toBe("undefined");
    }
    const response = await call("/globals");
    expect(await response.json()).toEqual(Object.fromEntries(NODE_ONLY_GLOBALS.map((name) => [name, "undefined"])));
  });

  for (const name of CASE_NAMES) {
    it(name, async () => {
      const response = await call("/run", { method: "POST", body: JSON.stringify({ case: name, input }) });
      expect(response.status).toBe(200);
      const result = (await response.json()) as RunResult;
      if (!result.ok) throw new Error(`in the Edge sandbox: ${result.error}`);
    });
  }
});
