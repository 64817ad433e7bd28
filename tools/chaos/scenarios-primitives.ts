/**
 * The scenarios of the semaphore and the read-write lock: their random workloads under faults,
 * the counterexample as a fixed schedule, and the negative controls that checkers 6 and 7
 * must catch (the count-per-node design of other libraries; a read lock that ignores the writer).
 * @module
 */
import { pairsFirst, readerBesideWriter } from "./drivers-primitives.js";
import type { Scenario } from "./scenario.js";

const base = { nodes: 5, quorum: 3, ttlMs: 2000, build: "src" as const };
/** The faults a lease survives, as the mutex's safe scenarios draw them. */
const faults = ["latency", "hang", "drop", "http-5xx", "partition", "pause-node"] as const;
const semaphore = { kind: "semaphore", permits: 2 } as const;
const one = (prefix: string) => [`${prefix}shared`];

export const PRIMITIVE_SCENARIOS: readonly Scenario[] = [
  {
    ...base,
    name: "semaphore-faults",
    kind: "safe",
    description:
      "a semaphore of 2 permits taken by every worker, under latency, lost requests, bad answers, partitions, node pauses",
    faults,
    primitive: semaphore,
    targets: one,
  },
  {
    ...base,
    name: "rw-faults",
    kind: "safe",
    description: "a read-write lock (30 % writes) taken by every worker, under the same faults",
    faults,
    primitive: { kind: "rw", writeShare: 0.3 },
    targets: one,
  },
  {
    ...base,
    nodes: 3,
    quorum: 2,
    name: "semaphore-pairs",
    kind: "safe",
    description: "the counterexample: k = 2, N = 3, three clients that each reach a different pair of nodes first",
    primitive: semaphore,
    driver: pairsFirst,
    driverClients: 3,
  },
  {
    ...base,
    nodes: 3,
    quorum: 2,
    name: "count-per-node",
    kind: "control",
    mustFire: ["overPermits"],
    description:
      "the count-per-node semaphore of other libraries under the counterexample's schedule: three holders of 2 permits",
    primitive: { ...semaphore, broken: "count-per-node" },
    driver: pairsFirst,
    driverClients: 3,
  },
  {
    ...base,
    name: "read-ignores-writer",
    kind: "control",
    mustFire: ["readWrite"],
    description: "a read lock that adds its reader whatever the write key says, beside a writer",
    primitive: { kind: "rw", writeShare: 0, broken: "read-ignores-writer" },
    driver: readerBesideWriter,
    driverClients: 2,
  },
];
