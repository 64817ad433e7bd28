/** Messages between the benchmark and its node host process (./node-host.ts). */

/** The latency model of one node, applied by its bridge and its TCP proxy alike. */
export interface NodeDelay {
  /** Added to every round trip, on the response direction (the command runs at once, its answer is held back). */
  fixedMs: number;
  /** Each request first waits a random delay in `[0, jitterMs)` on the request direction. */
  jitterMs: number;
}

/** One lock node as the clients see it. */
export interface HostNode {
  /** REST bridge URL. */
  url: string;
  token: string;
  /** Port of the delaying TCP proxy in front of the node's redis-server. */
  tcpPort: number;
  /** The redis-server's own port (no added delay; for instant, uncounted admin work only). */
  redisPort: number;
}

/** Requests/commands counted on the server side, per lock node, since the nodes started. */
export interface ServerCounts {
  /** HTTP requests received by each node's REST bridge. */
  http: number[];
  /** Commands each redis-server processed (INFO commandstats, less the INFO calls; includes commands run inside scripts). */
  commands: number[];
  /** Commands received through each node's TCP proxy (top-level commands, like HTTP requests). */
  tcp: number[];
  /** Commands received at the lock nodes' bridges, by lower-case name, summed over the nodes. */
  restByCommand: Record<string, number>;
  /** Commands received through the lock nodes' TCP proxies, by lower-case name, summed over the nodes. */
  tcpByCommand: Record<string, number>;
}

export type HostRequest =
  | { id: number; op: "delays"; delays: NodeDelay[]; data: NodeDelay }
  | { id: number; op: "counts" }
  | { id: number; op: "flush" }
  | { id: number; op: "stop" };

export type HostReply = { id: number; ok: true; counts?: ServerCounts } | { id: number; ok: false; error: string };

export interface HostStarted {
  type: "started";
  nodes: HostNode[];
  /** The data node the critical section reads and writes (not a lock node). */
  data: { url: string; token: string };
  pids: number[];
}
