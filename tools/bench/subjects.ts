/**
 * What the latency parts time: one acquire + release on a fresh key, by a lock system or by the
 * bare transport (the floor).
 */

import type { HostNode } from "./node-host-protocol.js";
import { COMPARE_AND_DELETE, RespConnection, restCommand, settledCount } from "./raw.js";
import { createClient, SYSTEMS, type SystemSpec, specLabel } from "./systems.js";

export interface Subject {
  label: string;
  transport: "REST" | "TCP";
  /** Acquire + release of `key`; rejects when the lock was not acquired. */
  once(key: string): Promise<void>;
  close(): Promise<void>;
}

const TTL_MS = 10_000;

/**
 * The REST floor: `SET key token NX PX ttl` to N nodes by `fetch`, done at the quorum-th answer;
 * then a compare-and-delete `EVAL` to N nodes, done at the quorum-th answer.
 */
export function floorRest(nodes: readonly HostNode[], n: number): Subject {
  const used = nodes.slice(0, n);
  const quorum = Math.floor(n / 2) + 1;
  return {
    label: `floor: raw fetch, N=${n}`,
    transport: "REST",
    async once(key) {
      const token = crypto.randomUUID();
      await settledCount(
        used.map((node) => restCommand(node, ["SET", key, token, "NX", "PX", TTL_MS])),
        quorum,
      );
      await settledCount(
        used.map((node) => restCommand(node, ["EVAL", COMPARE_AND_DELETE, 1, key, token])),
        quorum,
      );
    },
    close: async () => {},
  };
}

/** The TCP floor: the same two fan-outs over one kept-open RESP connection per node (through the delaying proxies). */
export async function floorTcp(nodes: readonly HostNode[], n: number): Promise<Subject> {
  const connections = await Promise.all(nodes.slice(0, n).map((node) => RespConnection.open(node.tcpPort)));
  const quorum = Math.floor(n / 2) + 1;
  return {
    label: `floor: raw TCP, N=${n}`,
    transport: "TCP",
    async once(key) {
      const token = crypto.randomUUID();
      await settledCount(
        connections.map((c) => c.command(["SET", key, token, "NX", "PX", TTL_MS])),
        quorum,
      );
      await settledCount(
        connections.map((c) => c.command(["EVAL", COMPARE_AND_DELETE, 1, key, token])),
        quorum,
      );
    },
    close: async () => {
      for (const c of connections) c.close();
    },
  };
}

/** A lock system's acquire + release. */
export async function lockSubject(spec: SystemSpec, nodes: readonly HostNode[]): Promise<Subject> {
  const client = await createClient(spec, { kind: "servers", nodes });
  const info = SYSTEMS[spec.id];
  return {
    label: specLabel(spec),
    transport: info.transport === "TCP" ? "TCP" : "REST",
    async once(key) {
      const handle = await client.acquire(key, TTL_MS);
      if (handle === null) throw new Error(`${specLabel(spec)} did not acquire an uncontended key`);
      await client.release(handle);
    },
    close: () => client.close(),
  };
}

/**
 * Times `perRound` sequential runs of every subject per round, in an order that rotates from
 * round to round; returns each subject's samples (ms) per round.
 */
export async function measureInterleaved(
  subjects: readonly Subject[],
  rounds: number,
  perRound: number,
  keyPrefix: string,
  beforeRound?: (round: number) => Promise<void>,
): Promise<number[][][]> {
  const samples = subjects.map(() => Array.from({ length: rounds }, () => [] as number[]));
  let serial = 0;
  // Warm-up: connections, script caches, JIT.
  for (const subject of subjects) for (let i = 0; i < 2; i++) await subject.once(`${keyPrefix}:warm:${serial++}`);
  for (let round = 0; round < rounds; round++) {
    await beforeRound?.(round);
    for (let k = 0; k < subjects.length; k++) {
      const index = (k + round) % subjects.length;
      const subject = subjects[index]!;
      for (let i = 0; i < perRound; i++) {
        const key = `${keyPrefix}:${serial++}`;
        const started = performance.now();
        await subject.once(key);
        samples[index]![round]!.push(performance.now() - started);
      }
    }
  }
  return samples;
}
