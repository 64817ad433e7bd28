/**
 * The scenarios of `npm run chaos` (safety.md §a, S1–S19): safe configurations, which must show
 * no anomaly, and negative controls, which must show the anomalies they are built for so the
 * checkers prove they have teeth. Random scenarios draw their faults from the seed; the controls
 * drive a fixed schedule step by step, so they fire on every run.
 * @module
 */

import { drivers } from "./drivers.js";
import type { Scenario } from "./scenario.js";
import { MISUSE_SCENARIOS } from "./scenarios-misuse.js";
import { PRIMITIVE_SCENARIOS } from "./scenarios-primitives.js";

export type { Scenario };

const base = { nodes: 5, quorum: 3, ttlMs: 2000, build: "src" as const };

/** Every scenario, in the order `--scenario all` runs them. */
export const SCENARIOS: readonly Scenario[] = [
  { ...base, name: "healthy", kind: "safe", description: "no faults: the baseline", faults: [] },
  {
    ...base,
    name: "slow-nodes",
    kind: "safe",
    description: "S2/S3/S7: per-node latency in the request or response phase, with jitter",
    faults: ["latency"],
  },
  {
    ...base,
    name: "lost-requests",
    kind: "safe",
    description: "S3/S13: requests held and never answered; connections dropped before or after the command ran",
    faults: ["hang", "drop"],
  },
  {
    ...base,
    name: "bad-answers",
    kind: "safe",
    description: "§5: 5xx pages and garbage bodies, before or after the command ran",
    faults: ["http-5xx", "garbage"],
  },
  {
    ...base,
    name: "partitions",
    kind: "safe",
    description: "S12: one client cut from up to N-q nodes",
    faults: ["partition"],
  },
  {
    ...base,
    name: "node-pauses",
    kind: "safe",
    description: "S18: a redis-server SIGSTOPped, then continued",
    faults: ["pause-node"],
  },
  {
    ...base,
    name: "delayed-restarts",
    kind: "safe",
    description: "S8 with the spec's delayed restart: killed, restarted empty after more than the max TTL",
    faults: ["restart-delayed"],
  },
  {
    ...base,
    quorum: 4,
    name: "amnesia-q4",
    kind: "safe",
    description: "S5/S8 at quorum 4 (f=1): restarts at once without state, forward clock jumps, one node at a time",
    faults: ["restart-now", "clock-jump"],
  },
  {
    ...base,
    name: "client-pauses",
    kind: "safe",
    unfencedLimit: true,
    description: "S1: a client SIGSTOPped for longer than the TTL, wherever it is",
    faults: ["pause-client"],
  },
  {
    ...base,
    name: "cpu-starvation",
    kind: "safe",
    unfencedLimit: true,
    description: "S1/S17: a client's event loop stalled by busy work",
    faults: ["stall-client"],
  },
  {
    ...base,
    name: "holder-dies",
    kind: "safe",
    description: "S15: the holder SIGKILLed while holding; time to re-acquire",
    faults: ["kill-client"],
  },
  {
    ...base,
    name: "hot-key",
    kind: "safe",
    description:
      "a hot key under S3/S8/S13/S15/S18: 12 workers wait in line at one gate node that pauses, drops polls and restarts empty",
    hotKey: { workers: 12, calmStartMs: 600 },
    faults: ["latency", "hang", "drop", "pause-node", "restart-delayed", "kill-client"],
  },
  {
    ...base,
    name: "hot-key-fenced",
    kind: "safe",
    fencing: true,
    description:
      "the hot key with fencing: 12 workers wait in line and take their turns with fenced attempts, while the gate node pauses, drops polls and restarts empty (quarantined)",
    hotKey: { workers: 12, calmStartMs: 600 },
    faults: ["latency", "hang", "drop", "pause-node", "restart-delayed", "kill-client"],
  },
  {
    ...base,
    name: "mixed",
    kind: "safe",
    unfencedLimit: true,
    description: "everything above that a majority quorum tolerates, drawn at random",
    faults: [
      "latency",
      "hang",
      "drop",
      "http-5xx",
      "garbage",
      "partition",
      "pause-node",
      "restart-delayed",
      "pause-client",
      "stall-client",
      "kill-client",
    ],
  },
  {
    ...base,
    ttlMs: 2000,
    name: "slow-grants",
    kind: "safe",
    description: "the broken-clock schedule with the real clock: every node answers 200 ms late",
    driver: drivers.brokenClock,
    driverClients: 1,
  },
  {
    ...base,
    ttlMs: 3000,
    name: "shorter-extension",
    kind: "safe",
    description: "the defect-extension schedule on the library as it is: extend with a fifth of the TTL",
    driver: drivers.shortenedExtension,
    driverClients: 1,
  },
  {
    ...base,
    ttlMs: 3000,
    name: "lost-extension",
    kind: "safe",
    description:
      "an extension to a fifth of the TTL runs on N-q+1 nodes whose answers are lost: it is reported failed, and the lock claims no more than the shorter TTL it may have set (fixed; it used to keep its old deadline)",
    driver: drivers.failedShorterExtension,
    driverClients: 1,
  },
  {
    ...base,
    ttlMs: 6000,
    quorum: 4,
    name: "s8-q4",
    kind: "safe",
    description: "S8 schedule at quorum floor((N+1)/2)+1 = 4: A on {0,1,2,3}, node 2 restarts empty, B reaches {2,3,4}",
    driver: drivers.s8,
    driverClients: 2,
  },
  {
    ...base,
    ttlMs: 6000,
    name: "s8-q3",
    kind: "control",
    mustFire: ["overlap"],
    description: "S8 schedule at the default quorum 3: A on {0,1,2}, node 2 restarts empty, B takes {2,3,4}",
    driver: drivers.s8,
    driverClients: 2,
  },
  {
    ...base,
    ttlMs: 6000,
    quorum: 4,
    name: "s5-q4",
    kind: "safe",
    description:
      "S5 (Kleppmann's clock jump) at quorum 4: A on {0,1,2,3}, node 2's clock jumps 2 TTLs, B reaches {2,3,4}",
    driver: drivers.s5,
    driverClients: 2,
  },
  {
    ...base,
    ttlMs: 6000,
    name: "s5-q3",
    kind: "control",
    mustFire: ["overlap"],
    description: "S5 at the default quorum 3: A on {0,1,2}, node 2's clock jumps 2 TTLs, B takes {2,3,4}",
    driver: drivers.s5,
    driverClients: 2,
  },
  {
    ...base,
    nodes: 1,
    quorum: 1,
    ttlMs: 3000,
    name: "failover",
    kind: "control",
    mustFire: ["overlap"],
    replicated: true,
    description: "S10: one Redis with a replica; replication blocked, master killed, replica promoted",
    driver: drivers.failover,
    driverClients: 2,
  },
  {
    ...base,
    ttlMs: 6000,
    name: "s8-fenced",
    kind: "safe",
    fencing: true,
    description:
      "S8 schedule at the default quorum 3 with fencing: the node that restarts empty is found without its marker and never grants, so B gets no quorum",
    driver: drivers.s8,
    driverClients: 2,
  },
  {
    ...base,
    name: "fenced-pause",
    kind: "control",
    mustFire: ["lostUnfenced"],
    unfencedLimit: true,
    fencing: true,
    description:
      "S1 with fencing: the paused holder's stale write loses an update on the unfenced counter and is refused by the fenced one",
    driver: drivers.unfencedPause,
    driverClients: 2,
  },
  {
    ...base,
    name: "unfenced-pause",
    kind: "control",
    mustFire: ["lostUnfenced"],
    unfencedLimit: true,
    description: "S1: the holder pauses between its last check and its write; the unfenced counter loses an update",
    driver: drivers.unfencedPause,
    driverClients: 2,
  },
  {
    ...base,
    ttlMs: 2000,
    name: "broken-clock",
    kind: "control",
    mustFire: ["overClaim"],
    brokenClock: true,
    description: "a client whose clock stands still during requests (validity not reduced by the elapsed time)",
    driver: drivers.brokenClock,
    driverClients: 1,
  },
  {
    ...base,
    ttlMs: 3000,
    name: "defect-extension",
    kind: "control",
    mustFire: ["overClaim"],
    build: "defect-extension",
    description: "the shortened-extension defect re-introduced: a shorter extension keeps the old deadline",
    driver: drivers.shortenedExtension,
    driverClients: 1,
  },
  {
    ...base,
    name: "broken-release",
    kind: "control",
    mustFire: ["foreignTouch", "overlap"],
    build: "broken-release",
    description: "a release script that deletes without comparing the token",
    driver: drivers.brokenRelease,
    driverClients: 3,
  },
  ...MISUSE_SCENARIOS,
  ...PRIMITIVE_SCENARIOS,
];

/** Looks a scenario up by name. */
export function scenarioByName(name: string): Scenario {
  const found = SCENARIOS.find((s) => s.name === name);
  if (!found)
    throw new Error(`unknown scenario ${JSON.stringify(name)}; known: ${SCENARIOS.map((s) => s.name).join(", ")}`);
  return found;
}
