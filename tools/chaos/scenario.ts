/**
 * What a chaos scenario is: its faults or its fixed schedule, its nodes, its build, and what its
 * checkers must find (see `scenarios.ts` for the list).
 * @module
 */
import type { BuildVariant } from "./build.js";
import type { AnomalyCounts } from "./checkers/index.js";
import type { DriverContext } from "./drivers.js";
import type { FaultKind } from "./history.js";
import type { Misuse, Primitive, Target } from "./protocol.js";

/** A scenario. */
export interface Scenario {
  readonly name: string;
  /** One line for the report: what it injects, which safety.md scenario it covers. */
  readonly description: string;
  /**
   * `safe`: C1–C3 and the fenced C4 must be 0. `control`: every checker in `mustFire` must fire
   * (the checkers have teeth). `finding`: a defect of the library as it is today, reproduced on
   * every run; its checkers must fire until the library is fixed, then it becomes a safe scenario.
   */
  readonly kind: "safe" | "control" | "finding";
  /** Checkers that must report at least one anomaly (controls and findings). */
  readonly mustFire?: readonly (keyof AnomalyCounts)[];
  /**
   * Faults that make lost updates on the unfenced counter an expected limit of any lease lock
   * (a paused holder writes after its lease ended): C4-unfenced is reported, not asserted.
   */
  readonly unfencedLimit?: boolean;
  readonly nodes: number;
  readonly quorum: number;
  readonly ttlMs: number;
  readonly build: BuildVariant;
  readonly brokenClock?: boolean;
  /** Random scenarios: the fault kinds the nemesis draws from (empty: no faults). */
  readonly faults?: readonly FaultKind[];
  /** Controls and fixed schedules: drives the clients step by step instead of the random workload. */
  readonly driver?: (ctx: DriverContext) => Promise<void>;
  /** Clients the driver needs (default: the run's client count). */
  readonly driverClients?: number;
  /** Workers in each driven client process (default 1): waiters in the holder's own process. */
  readonly driverWorkers?: number;
  /** Lock nodes are backed by a master and its replica (the failover control). */
  readonly replicated?: boolean;
  /**
   * Clients acquire with `fencing: true` (nodes initialised by the harness first); a quarantined
   * node keeps a restarted one out, and the fenced counter must lose no update.
   */
  readonly fencing?: boolean;
  /**
   * Every worker locks the same one resource (a hot key), so they wait in line at its gate node
   * instead of the two resources of the other random scenarios; node faults hit that gate node
   * half the time (the line's fallbacks: a gate paused, restarted empty or dropping polls).
   */
  readonly hotKey?: {
    /** Lock workers, spread over the client processes, instead of the run's `--clients`. */
    readonly workers: number;
    /** Client processes, instead of the run's `--processes`: fewer put more waiters in each holder's process. */
    readonly processes?: number;
    /**
     * Workload time before the fault schedule starts (the schedule runs as drawn, this much later,
     * and the workload lasts this much longer), so that the line forms at the gate while the gate
     * answers: the first fault comes 200 ms into the schedule and may hang the gate for most of a
     * short run, before a loaded machine has brought any client to its first poll.
     * @default 0
     */
    readonly calmStartMs?: number;
  };
  /**
   * What the random workload locks, from the scenario's key prefix, instead of its default
   * resources (or the hot key): names that need no prefix are lock keys too. The workers of a
   * process take them in turn, so that each is locked within a few rounds.
   */
  readonly targets?: (keyPrefix: string) => readonly Target[];
  /** The API misused as users misuse it, by the random workload (see `Misuse` in protocol.ts). */
  readonly misuse?: Misuse;
  /**
   * Two clusters of `nodes` nodes, whose node configs carry the same ids ("node-1", …), in every
   * client process: its even workers lock on the first, its odd ones on the second, with the same
   * resource names (recorded with a tag for the second, so the checkers keep them apart).
   */
  readonly equalIds?: boolean;
  /**
   * The workload takes a semaphore or a read-write lock (its targets name one) instead of mutexes:
   * C6 (permits) and C7 (read-write) check its grants, which C1 and C2 leave out.
   */
  readonly primitive?: Primitive;
}
