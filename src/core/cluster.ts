/**
 * Safe across deployments: clients of different node lists need not share a quorum node, so each
 * node keeps, per `keyPrefix`, the first cluster fingerprint it was checked with, and a client is
 * refused when a node that answers keeps another (see docs/deployments.md). An isolate keeps what
 * it learned as plain data, never a promise (on Workers one made by another request may never
 * settle): confirmations only, so a reset or a node's return is seen at the next call.
 * @module
 */
import type { Clock } from "../base/clock.js";
import { ConfigurationError, ValidityExhaustedError } from "../base/errors.js";
import type { RedisNode } from "../transport/rest.js";
import { fanOut, type RequestMeter } from "./fanout.js";
import { type ClusterResetResult, clusterFingerprint, keptOnNode, refusal, serverName } from "./fingerprint.js";
import type { Lock } from "./lock.js";
import type { ResolvedOptions } from "./options.js";

/** Per node: it confirmed our fingerprint. Until `recheckUntil`, a background recheck runs. */
interface Known {
  readonly confirmed: boolean[];
  recheckUntil: number;
}
const knownByClock = new WeakMap<Clock, Map<string, Known>>();

/** One client's cluster: its nodes and fingerprint, checked against what the nodes keep. */
export class Cluster {
  readonly #nodes: readonly RedisNode[];
  readonly #fingerprint: string;
  readonly #isolateKey: string;
  /** The key prefix {@link Cluster.#knownKey} was last built for, and that key. */
  #keyPrefix: string | undefined;
  #knownKey = "";

  /** @param identities what the requests reach, one per node (the key of the isolate's shared state). */
  constructor(nodes: readonly RedisNode[], configs: readonly object[], identities: readonly string[], name: unknown) {
    if (name !== undefined && (typeof name !== "string" || name.length === 0 || name.length > 256)) {
      throw new ConfigurationError("clusterName must be a non-empty string of at most 256 characters");
    }
    this.#nodes = nodes;
    this.#fingerprint = clusterFingerprint(
      nodes.map((node, i) => serverName(node, configs[i] as object)),
      name as string | undefined,
    );
    this.#isolateKey = `${JSON.stringify(identities)}\n${this.#fingerprint}`;
  }

  /**
   * Run `acquire` with the check alongside it, and return its lock only once the check passed: a
   * refused client releases what it got and throws the refusal (over any error of the
   * acquisition), so no caller of it ever holds a lock. Adds no round trip, and once the nodes
   * confirmed no request. The acquisition keeps the caller's signal alone: on Workers a signal of
   * this request must not reach a release made by another (a hand-over), so a refusal does not
   * cut short an acquisition waiting in line; its own limits end it.
   * @throws {ConfigurationError} a node keeps another cluster's fingerprint.
   */
  acquire(
    o: ResolvedOptions,
    signal: AbortSignal | undefined,
    meter: RequestMeter | undefined,
    acquire: () => Promise<Lock>,
  ): Promise<Lock> {
    const checking = this.#check(o, signal, meter);
    // Once the nodes confirmed, the acquisition's own promise is returned as it is: no async
    // wrapper adds its promise and ticks to every acquisition.
    if (checking === undefined) return acquire();
    return this.#acquireChecking(checking, acquire);
  }

  async #acquireChecking(checking: Promise<void>, acquire: () => Promise<Lock>): Promise<Lock> {
    checking.catch(() => undefined);
    let lock: Lock;
    try {
      lock = await acquire();
    } catch (error) {
      await checking;
      throw error;
    }
    const refusal = await checking.then(undefined, (error: unknown) => error);
    // Waiting for a slow node's answer must not return a lock below its least validity.
    if (refusal === undefined && lock.remainingMs() > lock.options.minValidityMs) return lock;
    await lock.release().catch(() => undefined);
    throw (
      refusal ?? new ValidityExhaustedError("validity ran out while the cluster check waited", [lock.acquireReport])
    );
  }

  /**
   * Nothing to wait for once a quorum confirmed: the others are asked in the background (waiting
   * for a dead node would hold up every grant of an outage, and it could not tell). Before, every
   * answer is awaited up to the deadline, so that a slow shared node can still refuse.
   */
  #check(o: ResolvedOptions, signal: AbortSignal | undefined, meter?: RequestMeter): Promise<void> | undefined {
    const known = this.#known(o);
    if (!known.confirmed.includes(false)) return undefined;
    const missing: number[] = [];
    for (let i = 0; i < this.#nodes.length; i++) if (!known.confirmed[i]) missing.push(i);
    if (this.#nodes.length - missing.length >= o.quorum) {
      const now = o.clock.now();
      if (known.recheckUntil > now) return undefined;
      known.recheckUntil = now + o.requestTimeoutMs;
      // A refusal found here clears the confirmations: the next acquisition waits for it.
      void this.#ask(o, missing, "check", undefined, meter);
      return undefined;
    }
    return this.#ask(o, missing, "check", signal, meter).then(({ refusal }) => {
      if (refusal !== undefined) throw refusal;
    });
  }

  /** Make this client's fingerprint the one every node keeps: after a drain only. */
  async reset(o: ResolvedOptions): Promise<ClusterResetResult> {
    const { outcomes } = await this.#ask(o, [...this.#nodes.keys()], "reset", undefined);
    this.#known(o).confirmed.fill(false);
    return { reset: outcomes.filter((n) => n.outcome === "initialized").length, nodes: outcomes };
  }

  #known(o: ResolvedOptions): Known {
    let byCluster = knownByClock.get(o.clock);
    if (byCluster === undefined) {
      byCluster = new Map<string, Known>();
      knownByClock.set(o.clock, byCluster);
    }
    // Built once per key prefix, not per acquisition (a client mostly uses one).
    if (o.keyPrefix !== this.#keyPrefix) {
      this.#keyPrefix = o.keyPrefix;
      this.#knownKey = `${this.#isolateKey}\n${JSON.stringify(o.keyPrefix)}`;
    }
    const key = this.#knownKey;
    let known = byCluster.get(key);
    if (known === undefined) {
      if (byCluster.size >= 256) byCluster.clear();
      known = { confirmed: this.#nodes.map(() => false), recheckUntil: Number.NEGATIVE_INFINITY };
      byCluster.set(key, known);
    }
    return known;
  }

  /** Check (or reset) `indices`; a check records who confirmed, or clears them all and makes the refusal. */
  async #ask(
    o: ResolvedOptions,
    indices: number[],
    mode: "check" | "reset",
    signal: AbortSignal | undefined,
    meter?: RequestMeter,
  ) {
    const foreign: { index: number; kept: string }[] = [];
    const yes = mode === "check" ? "verified" : "initialized";
    const outcomes = await fanOut({
      nodeIds: indices.map((i) => this.#node(i).id),
      yes,
      quorum: indices.length,
      timeoutMs: o.requestTimeoutMs,
      clock: o.clock,
      signal,
      meter,
      task: async (j, context) => {
        const index = indices[j] as number;
        const kept = await keptOnNode(this.#node(index), o.keyPrefix, this.#fingerprint, mode, context);
        if (kept === this.#fingerprint) return yes;
        foreign.push({ index, kept });
        return "held";
      },
    }).outcomes;
    if (mode === "reset") return { outcomes };
    const known = this.#known(o);
    if (foreign.length === 0) {
      outcomes.forEach((outcome, j) => {
        if (outcome.outcome === yes) known.confirmed[indices[j] as number] = true;
      });
      return { outcomes };
    }
    known.confirmed.fill(false);
    return { outcomes, refusal: refusal(foreign, this.#nodes, o.keyPrefix) };
  }

  #node = (index: number) => this.#nodes[index] as RedisNode;
}
