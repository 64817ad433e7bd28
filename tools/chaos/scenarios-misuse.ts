/**
 * Scenarios of the API misused as users misuse it (issue 27), with the checkers the harness
 * already has (C1 overlap, C2 claim against the nodes' expiry): `release()` called twice or three
 * times, `release()` inside `using()` before `using()`'s own, released tokens misused by token from
 * other client instances, extensions left in flight at the release, two clusters with equal node
 * ids in one process, and resource names with "\n", quotes, separators, JSON and 1,024 characters.
 *
 * The random ones run a hot key (or a handful of resources) with several workers per process, so
 * that waiters of the holder's own process take the lock over from its release. The fixed
 * schedules run once on the library as it is (safe) and once on a patched copy (a control: the
 * defect each re-introduces must be reported on every run).
 * @module
 */

import { equalIdsCollision, handOverMisuse, newlineNamesCollision } from "./misuse-drivers.js";
import type { Target } from "./protocol.js";
import type { Scenario } from "./scenario.js";

/**
 * A TTL of 5 s: a holder then releases with most of it left, which is when a lock used to be
 * passed on with its token (a pass-on needed 90 % of the validity). Not longer: a client's
 * background cleanup may take up to a TTL, and every run waits for it at the end.
 */
const base = { nodes: 5, quorum: 3, ttlMs: 5000, build: "src" as const };
/** Two clusters of three nodes (see `Scenario.equalIds`). */
const twins = { ...base, nodes: 3, quorum: 2, equalIds: true };
/** The schedules of `misuse-drivers.ts`: two processes of two workers. */
const driven = { driverClients: 2, driverWorkers: 2 };

/**
 * Names that only an unambiguous encoding keeps apart: `a\nb` and the pair `["a", "b"]` (joined by
 * "\n", one name), the pair's JSON name as a single resource (the gate's line of the pair, as it
 * was named), `a` alone (a set sharing a key with the pair), quotes, ":" and "/", a JSON-looking
 * name after the prefix, and a name of 1,024 characters. The colliding ones are listed twice, so
 * that the workload draws them more often.
 */
function oddNames(p: string): Target[] {
  const pair = [`${p}a`, `${p}b`];
  const joined = `${p}a\n${p}b`;
  return [
    joined,
    joined,
    pair,
    pair,
    JSON.stringify(pair),
    `${p}a`,
    `${p}say "hi"`,
    `${p}x:y/z`,
    `${p}["a","b"]`,
    `${p}${"n".repeat(1024 - p.length)}`,
  ];
}

export const MISUSE_SCENARIOS: readonly Scenario[] = [
  {
    ...base,
    name: "release-twice",
    kind: "safe",
    description:
      "6 workers of one process (callers of one isolate) on a hot key: release() called again once or twice (at once or after it), and release() inside using() before using()'s own",
    hotKey: { workers: 6, processes: 1 },
    misuse: { repeatRelease: 0.6, releaseInUsing: 0.4 },
    faults: [],
  },
  {
    ...base,
    name: "stale-tokens",
    kind: "safe",
    description:
      "12 workers on a hot key, 6 per process: released tokens handed to other client instances, which release or extend (shorter) by token with them",
    hotKey: { workers: 12, processes: 2 },
    misuse: { staleToken: 0.6 },
    faults: [],
  },
  {
    ...base,
    name: "extend-in-flight",
    kind: "safe",
    description:
      "12 workers on a hot key, 6 per process, requests late with jitter: extensions (shorter or longer than the TTL) left in flight at the release",
    hotKey: { workers: 12, processes: 2 },
    misuse: { extendInFlight: 0.7 },
    faults: ["latency"],
  },
  {
    ...twins,
    name: "equal-ids",
    kind: "safe",
    description:
      "two 3-node clusters whose node configs carry the same ids, in both processes: 12 workers on one hot key name, half on each cluster",
    hotKey: { workers: 12, processes: 2 },
    faults: [],
  },
  {
    ...base,
    name: "odd-names",
    kind: "safe",
    description:
      'names with "\\n", quotes, ":" and "/", JSON and 1,024 characters, and a pair whose keys joined by "\\n" are another name: 9 workers, 3 per process',
    hotKey: { workers: 9 },
    targets: oddNames,
    misuse: { repeatRelease: 0.3, staleToken: 0.3 },
    faults: [],
  },
  {
    ...base,
    ...driven,
    name: "hand-over-misuse",
    kind: "safe",
    description:
      "a holder with a waiter in its process leaves a shorter extension in flight, releases three times, and its token is extended and released by another process",
    driver: handOverMisuse,
  },
  {
    ...twins,
    ...driven,
    name: "equal-ids-schedule",
    kind: "safe",
    description:
      "two clusters with equal node ids in one process: a release on one while a worker waits for the same name on the other, held there by another process",
    driver: equalIdsCollision,
  },
  {
    ...base,
    ...driven,
    name: "newline-names",
    kind: "safe",
    description: 'a release of ["a", "b"] while a worker of its process waits for "a\\nb", held by another process',
    driver: newlineNamesCollision,
  },
  {
    ...base,
    ...driven,
    name: "shared-token",
    kind: "control",
    mustFire: ["overlap", "overClaim"],
    build: "shared-token",
    description:
      "the hand-over-misuse schedule with a hand-over that leaves the keys with the releasing holder's token (the pass-on's hazard)",
    driver: handOverMisuse,
  },
  {
    ...twins,
    ...driven,
    name: "display-id",
    kind: "control",
    mustFire: ["overlap", "overClaim"],
    build: "display-id",
    description: "the equal-ids schedule with the isolate's state keyed by the nodes' display ids",
    driver: equalIdsCollision,
  },
  {
    ...base,
    ...driven,
    name: "newline-hot-key",
    kind: "control",
    mustFire: ["overlap", "overClaim"],
    build: "newline-hot-key",
    description: 'the newline-names schedule with the isolate\'s key of a resource set joined by "\\n"',
    driver: newlineNamesCollision,
  },
];
