/**
 * A loopback TCP proxy in front of one redis-server that adds the same latency model as the REST
 * bridge, so TCP clients (ioredis) and REST clients see the same network:
 * - the fixed delay holds back every chunk the server sends (response direction, like the
 *   bridge's default `phase: "response"`: the command runs at once, its answer arrives late);
 * - the jitter holds back every chunk the client sends by a fresh random delay in `[0, jitterMs)`
 *   (request direction, like the bridge's jitter), so clients reach the server in varying orders;
 * - the request delay holds back every chunk the client sends by a fixed time (request direction):
 *   with the fixed delay, it splits a round trip into its two one-way halves, so that a command
 *   runs at the server when it would have arrived (the isolates parts put one proxy per node in
 *   each client process, with that process's own latency).
 * Chunks of one connection keep their order (a TCP stream cannot reorder): a chunk is released
 * no earlier than the one before it.
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import { parseResp } from "./raw.js";

/** The latency model of one proxy. */
export interface ProxyDelay {
  /** Added to every round trip, on the server → client direction. */
  fixedMs: number;
  /** Upper bound of the random delay added to each client → server chunk. */
  jitterMs: number;
  /** Fixed delay added to each client → server chunk, before the jitter. @default 0 */
  requestMs?: number;
}

/** A running proxy. */
export interface TcpProxy {
  readonly port: number;
  setDelay(delay: ProxyDelay): void;
  /** Commands clients sent through the proxy so far, by lower-case name (counted like HTTP requests at the bridge). */
  commandCounts(): Record<string, number>;
  /** Closes the listener and every proxied connection. */
  close(): Promise<void>;
}

/**
 * A one-direction pipe that releases each chunk after its own delay, in order: chunks wait in a
 * FIFO queue served by one timer at a time (separate timers could fire out of order), and a
 * chunk never leaves before the one ahead of it.
 */
function delayedPipe(from: Socket, to: Socket, delayOf: () => number): void {
  const queue: { at: number; chunk: Buffer }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    timer = undefined;
    const now = performance.now();
    while (queue.length > 0 && (queue[0] as { at: number }).at <= now + 0.5) {
      const { chunk } = queue.shift() as { chunk: Buffer };
      if (!to.destroyed) to.write(chunk);
    }
    if (queue.length > 0) timer = setTimeout(flush, (queue[0] as { at: number }).at - now);
  };
  from.on("data", (chunk: Buffer) => {
    const now = performance.now();
    const wait = delayOf();
    if (queue.length === 0 && wait <= 0) {
      to.write(chunk);
      return;
    }
    const previous = queue.at(-1)?.at ?? 0;
    queue.push({ at: Math.max(previous, now + wait), chunk });
    timer ??= setTimeout(flush, Math.max(0, (queue[0] as { at: number }).at - now));
  });
  from.on("close", () => {
    if (timer) clearTimeout(timer);
  });
}

/** Counts the RESP commands a client sends (arrays of bulk strings), by name, across chunk boundaries. */
function commandCounter(counts: Record<string, number>): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    let offset = 0;
    for (;;) {
      const parsed = parseResp(pending, offset);
      if (!parsed) break;
      offset = parsed.end;
      const name = Array.isArray(parsed.value) ? String(parsed.value[0]).toLowerCase() : "inline";
      counts[name] = (counts[name] ?? 0) + 1;
    }
    pending = pending.subarray(offset);
  };
}

/** Starts a proxy on a free loopback port forwarding to `127.0.0.1:targetPort`. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let delay: ProxyDelay = { fixedMs: 0, jitterMs: 0, requestMs: 0 };
  const sockets = new Set<Socket>();
  const commands: Record<string, number> = {};
  const server: Server = createServer((client) => {
    const upstream = connect({ host: "127.0.0.1", port: targetPort });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("close", drop).on("error", drop);
    upstream.on("close", drop).on("error", drop);
    client.on("data", commandCounter(commands));
    delayedPipe(
      client,
      upstream,
      () => (delay.requestMs ?? 0) + (delay.jitterMs > 0 ? Math.random() * delay.jitterMs : 0),
    );
    delayedPipe(upstream, client, () => delay.fixedMs);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("proxy has no port");
  return {
    port: address.port,
    setDelay(next) {
      delay = { ...next };
    },
    commandCounts: () => ({ ...commands }),
    close() {
      return new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      });
    },
  };
}
