/**
 * The portable suite under `bun test`, one Bun test per case, against the built package.
 * Started by bun.test.ts, which passes the nodes in EDGE_REDLOCK_SUITE. By hand, with nodes from
 * `npm run nodes` (after `npm run build`):
 *
 *   EDGE_REDLOCK_SUITE='{"nodes":[…],"deadUrl":"http://127.0.0.1:9"}' npx bun test ./test/runtimes/bun/portable.bun.ts
 */
import { test } from "bun:test";
import * as lib from "../edge-redlock.js";
import { CASE_NAMES, portableSuite, RESOLUTION_CASE, type SuiteInput } from "../portable-suite.js";

const input = JSON.parse(process.env.EDGE_REDLOCK_SUITE ?? "null") as Omit<SuiteInput, "runtime"> | null;
if (input === null) throw new Error("set EDGE_REDLOCK_SUITE to {nodes, deadUrl} (see the top of this file)");
const suite = portableSuite(lib, { ...input, runtime: "bun" });

for (const name of CASE_NAMES) test(name, suite[name], 30_000);

test(RESOLUTION_CASE, async () => {
  const resolved = import.meta.resolve("edge-redlock");
  if (!resolved.endsWith("/dist/index.js")) throw new Error(`edge-redlock resolved to ${resolved}`);
});
