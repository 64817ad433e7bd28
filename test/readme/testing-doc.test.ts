/**
 * Every TypeScript sample in docs/testing.md compiles against the built package, as a user's
 * project sees `edge-redlock/testing` (strict, moduleResolution bundler and nodenext): see
 * samples.ts. The samples are vitest tests; test/unit/testing/ runs the same flows.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { extractSamples, type Resolution, typeCheckSamples } from "./samples.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const WORK_ROOT = `${ROOT}node_modules/.cache/edge-redlock-testing-doc-samples`;
const DOC = readFileSync(`${ROOT}docs/testing.md`, "utf8");

describe("docs/testing.md samples", () => {
  const samples = extractSamples(DOC);

  it("finds every TypeScript block, each importing edge-redlock/testing", () => {
    expect(samples.length).toBe(DOC.split("\n").filter((line) => /^```(ts|typescript)\s*$/.test(line)).length);
    expect(samples.length).toBeGreaterThanOrEqual(3);
    for (const sample of samples) expect(sample.code).toContain('from "edge-redlock/testing"');
  });

  it.each(["bundler", "nodenext"] as Resolution[])("all compile, strict, with moduleResolution %s", (resolution) => {
    const errors = typeCheckSamples(samples, resolution, WORK_ROOT);
    expect(errors.map((e) => `docs/testing.md:${e.line}: ${e.message}`)).toEqual([]);
  });

  it("negative control: a sample that misuses the testing entry does not compile", () => {
    const wrong = {
      line: 1,
      context: "",
      code: 'import { memoryNode } from "edge-redlock/testing";\nmemoryNode({ latencyMs: "slow" });',
    };
    expect(typeCheckSamples([wrong], "bundler", WORK_ROOT)).not.toEqual([]);
  });
});
