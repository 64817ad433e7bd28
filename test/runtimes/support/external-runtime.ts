/**
 * Declares the vitest tests of a runtime that runs the portable suite with its own test runner
 * (Deno, Bun): one vitest test per case, passed only if that runtime reported the case as passed,
 * plus one that checks it ran every case (so a runner that ran nothing fails too).
 */
const EXPECTED = [RESOLUTION_CASE, ...CASE_NAMES];

import { beforeAll, describe, expect, inject, it } from "vitest";
import { CASE_NAMES, RESOLUTION_CASE } from "../portable-suite.js";
import { type CaseResult, type Finished, run } from "./subprocess.js";

export interface ExternalRuntime {
  /** e.g. "Deno 2.9.6". */
  title: string;
  command: string;
  args: string[];
  env?: Record<string, string>;
  /** Reads the per-case results from the runner's output. */
  parse(finished: Finished): Map<string, CaseResult>;
  timeoutMs: number;
}

export function describeExternalRuntime(runtime: ExternalRuntime): void {
  let finished: Finished;
  let results = new Map<string, CaseResult>();
  const transcript = () => `--- stdout\n${finished.stdout}\n--- stderr\n${finished.stderr}`;

  beforeAll(async () => {
    const suite = JSON.stringify({ nodes: inject("nodes"), deadUrl: inject("deadUrl") });
    finished = await run(
      runtime.command,
      runtime.args,
      { ...runtime.env, EDGE_REDLOCK_SUITE: suite },
      runtime.timeoutMs,
    );
    results = runtime.parse(finished);
  }, runtime.timeoutMs + 5_000);

  describe(runtime.title, () => {
    it("ran every case and exited 0", () => {
      expect([...results.keys()].sort(), transcript()).toEqual([...EXPECTED].sort());
      expect(finished.code, transcript()).toBe(0);
    });

    for (const name of EXPECTED) {
      it(name, () => {
        const result = results.get(name);
        if (result === undefined) throw new Error(`${runtime.title} did not report this case\n${transcript()}`);
        if (!result.ok) throw new Error(`in ${runtime.title}: ${result.detail}`);
      });
    }
  });
}
