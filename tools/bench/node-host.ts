/**
 * The benchmark's nodes, in a process of their own so that serving them never competes with the
 * clients being measured for the same event loop. Forked by {@link startNodeHost} in
 * ./node-host-client.ts; controlled over the IPC channel. It starts `count` lock nodes
 * (redis-server + REST bridge, see tools/nodes) plus one data node for the critical section, and
 * a delaying TCP proxy in front of every lock node's redis-server for the TCP clients. It stops
 * everything when told to, or when its parent goes away (the IPC channel closes).
 */
import { Redis } from "ioredis";
import { startNodes } from "../nodes/index.js";
import type { HostReply, HostRequest, HostStarted, NodeDelay } from "./node-host-protocol.js";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.js";

function send(message: HostStarted | HostReply): void {
  process.send?.(message);
}

/** `calls=` per command from INFO commandstats, leaving out the INFO calls themselves. */
function commandCalls(info: string): Record<string, number> {
  const calls: Record<string, number> = {};
  for (const line of info.split("\n")) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match && match[1] !== "info") calls[match[1] as string] = Number(match[2]);
  }
  return calls;
}

const total = (calls: Record<string, number>) => Object.values(calls).reduce((a, b) => a + b, 0);

/** Per-name counts added up over nodes. */
function sum(perNode: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const node of perNode) for (const [name, n] of Object.entries(node)) out[name] = (out[name] ?? 0) + n;
  return out;
}

async function main(): Promise<void> {
  const count = Number(process.argv[2] ?? "5");
  const cluster = await startNodes({ count: count + 1 });
  const lockNodes = cluster.nodes.slice(0, count);
  const dataNode = cluster.nodes[count]!;
  const proxies: TcpProxy[] = await Promise.all(lockNodes.map((n) => startTcpProxy(n.redisPort)));
  // Direct connections (not through the proxies) for counting and flushing.
  const admins = cluster.nodes.map(
    (n) => new Redis({ host: "127.0.0.1", port: n.redisPort, lazyConnect: false, maxRetriesPerRequest: 1 }),
  );
  for (const admin of admins) admin.on("error", () => {});

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      for (const admin of admins) admin.disconnect();
      await Promise.all(proxies.map((p) => p.close()));
      await cluster.stop();
    })();
    return stopping;
  };

  const setDelays = (delays: NodeDelay[], data: NodeDelay) => {
    lockNodes.forEach((_, i) => {
      const d = delays[i] ?? { fixedMs: 0, jitterMs: 0 };
      cluster.setDelay(i, d.fixedMs, "response");
      cluster.setJitter(i, d.jitterMs);
      proxies[i]!.setDelay(d);
    });
    cluster.setDelay(count, data.fixedMs, "response");
    cluster.setJitter(count, data.jitterMs);
  };

  process.on("message", (message: HostRequest) => {
    void (async () => {
      try {
        switch (message.op) {
          case "delays":
            setDelays(message.delays, message.data);
            send({ id: message.id, ok: true });
            break;
          case "counts": {
            const http = cluster.requestCounts();
            const infos = await Promise.all(admins.slice(0, count).map((a) => a.info("commandstats")));
            const tcpCounts = proxies.map((p) => p.commandCounts());
            send({
              id: message.id,
              ok: true,
              counts: {
                http: http.slice(0, count),
                commands: infos.map(commandCalls).map(total),
                tcp: tcpCounts.map(total),
                restByCommand: sum(cluster.commandCounts().slice(0, count)),
                tcpByCommand: sum(tcpCounts),
              },
            });
            break;
          }
          case "flush":
            await Promise.all(admins.map((a) => a.flushall()));
            send({ id: message.id, ok: true });
            break;
          case "stop":
            await stop();
            send({ id: message.id, ok: true });
            process.disconnect?.();
            process.exit(0);
        }
      } catch (error) {
        send({ id: message.id, ok: false, error: (error as Error).message });
      }
    })();
  });
  // The parent died or let go of us: nobody will stop us, so stop now.
  process.on("disconnect", () => {
    void stop().then(() => process.exit(0));
  });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => void stop().then(() => process.exit(0)));
  }

  send({
    type: "started",
    nodes: lockNodes.map((n, i) => ({ url: n.url, token: n.token, tcpPort: proxies[i]!.port, redisPort: n.redisPort })),
    data: { url: dataNode.url, token: dataNode.token },
    pids: cluster.pids(),
  });
}

main().catch((error: Error) => {
  process.stderr.write(`node host failed: ${error.message}\n`);
  process.exit(1);
});
