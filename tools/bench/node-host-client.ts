/** The benchmark's side of the node host process: start it, control its delays, read its counts. */
import { fileURLToPath } from "node:url";
import { exited, forkTs } from "./fork.js";
import type { HostNode, HostReply, HostRequest, HostStarted, NodeDelay, ServerCounts } from "./node-host-protocol.js";

/** Nodes served by a separate process. */
export interface NodeHost {
  readonly nodes: readonly HostNode[];
  readonly data: { url: string; token: string };
  /** PIDs of the host's redis-servers. */
  readonly pids: readonly number[];
  readonly hostPid: number;
  /** Sets every lock node's delay (missing entries: none) and the data node's. */
  setDelays(delays: NodeDelay[], data?: NodeDelay): Promise<void>;
  /** The same delay on every lock node and on the data node (jitter on lock nodes only). */
  setUniformDelay(fixedMs: number, jitterMs?: number): Promise<void>;
  counts(): Promise<ServerCounts>;
  /** FLUSHALL on every node (direct, no delay). */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

type Request = HostRequest extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

/** Forks the node host with `count` lock nodes and waits until every node answers. */
export async function startNodeHost(count: number): Promise<NodeHost> {
  const child = forkTs(fileURLToPath(new URL("./node-host.ts", import.meta.url)), [String(count)]);
  const pending = new Map<number, (reply: HostReply) => void>();
  let nextId = 1;
  const started = await new Promise<HostStarted>((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`node host exited during start (code ${code})`));
    child.once("exit", onExit);
    child.on("message", (message: HostStarted | HostReply) => {
      if ("type" in message) {
        child.off("exit", onExit);
        resolve(message);
        return;
      }
      pending.get(message.id)?.(message);
      pending.delete(message.id);
    });
  });
  const call = (request: Request): Promise<HostReply> => {
    if (!child.connected) return Promise.reject(new Error("node host is gone"));
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, (reply) => (reply.ok ? resolve(reply) : reject(new Error(reply.error))));
      child.send({ ...request, id } as HostRequest);
    });
  };
  let stopped: Promise<void> | undefined;
  return {
    nodes: started.nodes,
    data: started.data,
    pids: started.pids,
    hostPid: child.pid as number,
    async setDelays(delays, data = { fixedMs: 0, jitterMs: 0 }) {
      await call({ op: "delays", delays, data });
    },
    async setUniformDelay(fixedMs, jitterMs = 0) {
      await call({
        op: "delays",
        delays: started.nodes.map(() => ({ fixedMs, jitterMs })),
        data: { fixedMs, jitterMs: 0 },
      });
    },
    async counts() {
      const reply = await call({ op: "counts" });
      return (reply as { counts: ServerCounts }).counts;
    },
    async flush() {
      await call({ op: "flush" });
    },
    stop() {
      stopped ??= (async () => {
        const gone = exited(child);
        try {
          await Promise.race([call({ op: "stop" }), gone]);
        } catch {
          // already gone
        }
        const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
        await gone;
        clearTimeout(timer);
      })();
      return stopped;
    },
  };
}
