/**
 * The portable suite on Node, against the built package: ../edge-redlock.js imports
 * "edge-redlock", which Node itself resolves through package.json "exports" to dist/ (the
 * project marks that shim external, so vite does not transform the library).
 */
import { describe, expect, inject, it } from "vitest";
import * as lib from "../edge-redlock.js";
import { CASE_NAMES, portableSuite, type SuiteAssert } from "../portable-suite.js";

const expectAssert: SuiteAssert = {
  ok: (value, message) => expect(value, message).toBeTruthy(),
  equal: (actual, expected, message) => expect(actual, message).toBe(expected),
};

const suite = portableSuite(lib, { nodes: inject("nodes"), deadUrl: inject("deadUrl"), runtime: "node" }, expectAssert);

describe(`Node ${process.version}`, () => {
  it("runs the built package from dist/, loaded by Node", () => {
    let stack = "";
    try {
      new lib.Redlock({ nodes: [] });
    } catch (error) {
      stack = (error as Error).stack ?? "";
    }
    expect(stack).toMatch(/^ConfigurationError/);
    expect(stack).toMatch(/file:\/\/\S+\/dist\/index\.js:\d+/);
  });

  for (const name of CASE_NAMES) it(name, suite[name]);
});
