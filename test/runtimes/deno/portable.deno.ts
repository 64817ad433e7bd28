/**
 * The portable suite under `deno test`, one Deno test per case, against the built package.
 * Started by deno.test.ts, which passes the nodes in EDGE_REDLOCK_SUITE. By hand, with nodes from
 * `npm run nodes` (after `npm run build`):
 *
 *   EDGE_REDLOCK_SUITE='{"nodes":[…],"deadUrl":"http://127.0.0.1:9"}' DENO_NO_UPDATE_CHECK=1 \
 *     npx deno test --sloppy-imports --allow-net=127.0.0.1 --allow-env=EDGE_REDLOCK_SUITE test/runtimes/deno/portable.deno.ts
 *
 * `--sloppy-imports` only lets these test files keep the `.js` specifiers of the TypeScript
 * sources they share with Node; the library itself is plain `.js` and needs no flag.
 */
import * as lib from "../edge-redlock.js";
import { CASE_NAMES, portableSuite, RESOLUTION_CASE, type SuiteInput } from "../portable-suite.js";

const input = JSON.parse(Deno.env.get("EDGE_REDLOCK_SUITE") ?? "null") as Omit<SuiteInput, "runtime"> | null;
if (input === null) throw new Error("set EDGE_REDLOCK_SUITE to {nodes, deadUrl} (see the top of this file)");
const suite = portableSuite(lib, { ...input, runtime: "deno" });

for (const name of CASE_NAMES) Deno.test(name, suite[name]);

Deno.test(RESOLUTION_CASE, async () => {
  const resolved = import.meta.resolve("edge-redlock");
  if (!resolved.endsWith("/dist/index.js")) throw new Error(`edge-redlock resolved to ${resolved}`);
});
