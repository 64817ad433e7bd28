/** Messages between the client-CPU part and its subject processes (./cpu-subject.ts). */

/**
 * A subject: edge-redlock over RedisNode objects or its fetch transport, `edge-redlock/core`
 * (backoff waiting) over RedisNode objects, or a peer.
 */
export type CpuSubjectKind =
  | "edge-redlock:memory"
  | "edge-redlock:rest"
  | "edge-redlock-core:memory"
  | "upstash-lock"
  | "sesame-redlock"
  | "redlock-universal";

export type CpuRequest =
  | { type: "prepare"; kind: CpuSubjectKind; nodes: number; libraryPath: string; warmUp: number }
  | { type: "round"; runs: number }
  | { type: "close" };

export type CpuReply =
  | { type: "ready" }
  | { type: "round"; microseconds: number; requests: number }
  | { type: "closed" }
  | { type: "failed"; error: string };
