/**
 * The scenarios of the semaphore and the read-write lock: their random workloads under faults,
 * the counterexample as a fixed schedule, and the negative controls that checkers 6 and 7
 * must catch (the count-per-node design of other libraries; a read lock that ignores the writer);
 * and the fenced write lock: the fenced counter, written under write locks only, loses no update
 * under faults, nor when a writer pauses past its lease (whose stale write the unfenced counter
 * takes, the control that shows the pause happened).
 * @module
 */
import { drivers } from "./drivers.js";
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
    name: "rw-fenced-faults",
    kind: "safe",
    fencing: true,
    description:
      "a read-write lock with fenced write locks (half the grants) under the same faults: the fenced counter, written under write locks, loses no update",
    faults,
    primitive: { kind: "rw", writeShare: 0.5 },
    targets: one,
  },
  {
    ...base,
    name: "rw-fenced-pause",
    kind: "control",
    mustFire: ["lostUnfenced"],
    unfencedLimit: true,
    fencing: true,
    description:
      "S1 with a fenced write lock: the paused writer's stale write loses an update on the unfenced counter and is refused by the fenced one",
    primitive: { kind: "rw", writeShare: 1 },
    driver: drivers.unfencedPause,
    driverClients: 2,
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
