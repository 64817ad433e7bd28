/**
 * A TCP relay that can hold traffic: the replication link between a master and its replica runs
 * through it, so the failover control can block replication deterministically (pausing the replica
 * process would not do: the kernel keeps receiving into its socket buffer).
 * @module
 */

import type { AddressInfo } from "node:net";
import { connect, createServer, type Socket } from "node:net";

/** A running relay. */
export interface TcpRelay {
  readonly port: number;
  /** Stops forwarding in both directions; bytes are held (and dropped when the relay closes). */
  block(): void;
  close(): Promise<void>;
}

/** Relays 127.0.0.1:<port> to 127.0.0.1:`targetPort`. */
export async function startTcpRelay(targetPort: number): Promise<TcpRelay> {
  let blocked = false;
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = connect(targetPort, "127.0.0.1");
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
    }
    const pipe = (from: Socket, to: Socket) =>
      from.on("data", (chunk) => {
        if (!blocked) to.write(chunk);
      });
    pipe(inbound, outbound);
    pipe(outbound, inbound);
    inbound.on("close", () => outbound.destroy());
    outbound.on("close", () => inbound.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    block() {
      blocked = true;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
