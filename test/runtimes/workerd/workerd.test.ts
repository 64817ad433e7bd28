/**
 * The portable suite in workerd. This file runs in the vitest pool's runner worker; the suite
 * itself runs in a second, plain worker (worker.ts, bound as `SUITE`) that has no compatibility
 * flags, hence no Node.js APIs: the pool forces nodejs_compat on its runner, which would hide a
 * Buffer or process use in the library.
 */
import { env } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";
import { CASE_NAMES, type SuiteInput } from "../portable-suite.js";
import { NODE_ONLY_GLOBALS, type RunResult } from "../suite-handler.js";

const input: SuiteInput = { nodes: inject("nodes"), deadUrl: inject("deadUrl"), runtime: "workerd" };

describe("workerd (plain worker, no compatibility flags)", () => {
  it("has no Node-only globals", async () => {
    const response = await env.SUITE.fetch("http://suite/globals");
    expect(await response.json()).toEqual(Object.fromEntries(NODE_ONLY_GLOBALS.map((name) => [name, "undefined"])));
  });

  for (const name of CASE_NAMES) {
    it(name, async () => {
      const response = await env.SUITE.fetch("http://suite/run", {
        method: "POST",
        body: JSON.stringify({ case: name, input }),
      });
      expect(response.status).toBe(200);
      const result = (await response.json()) as RunResult;
      if (!result.ok) throw new Error(`in workerd: ${result.error}`);
    });
  }
});
