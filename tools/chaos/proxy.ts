/**
 * The fault proxy: one HTTP server in front of each node's REST bridge, outside the library. Each
 * client process talks to node i through `http://127.0.0.1:<port i>/c/<client>`, so a fault can
 * target one node, one client, or one client's link to some nodes (a partition).
 *
 * Faults (all chosen by the nemesis from the run's seed; per-request jitter and garbage bodies come
 * from a seeded generator too, drawn in the order requests arrive):
 * - latency: hold the request before forwarding it (`phase: "request"`: it lands late, possibly
 *   after the client gave up) or hold the answer (`"response"`: applied, confirmed late), plus jitter;
 * - hang: never forward, never answer;
 * - drop: close the connection, before forwarding or after the command was applied;
 * - http-5xx: answer 503 with an HTML page, before forwarding or after the command was applied;
 * - garbage: answer 200 with an unparsable or ill-typed body, before forwarding or after;
 * - partition: hang every request from the given clients to the given nodes.
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { FaultSpec } from "./history.js";
import { createRng, type Rng } from "./rng.js";

/** The proxies of all nodes of a run. */
export interface FaultProxy {
  /** Proxy base URL of node i for a client, e.g. "http://127.0.0.1:40001/c/c3". */
  urlFor(node: number, client: string): string;
  /** Turns a fault on. Only the proxy kinds (latency, hang, drop, http-5xx, garbage, partition) act here. */
  add(fault: FaultSpec): void;
  /** Turns a fault off. Requests already hanging stay hung until their client gives up. */
  remove(faultId: number): void;
  /** Points node i's proxy at another bridge (failover), whose token it then sends instead of the client's. */
  retarget(node: number, bridgeUrl: string, token: string): void;
  /** Requests forwarded per node (for the report). */
  forwarded(): number[];
  close(): Promise<void>;
}

const PROXY_KINDS = new Set(["latency", "hang", "drop", "http-5xx", "garbage", "partition"]);

const GARBAGE_BODIES = [
  '{"result":"OK"',
  "<html><body>502 Bad Gateway</body></html>",
  '{"result":{"ok":true}}',
  '{"resu',
  "",
  '{"error":null,"result":[1,"OK",null]}',
];

/** Starts one proxy per bridge URL. */
export async function startFaultProxy(bridgeUrls: readonly string[], seed: number): Promise<FaultProxy> {
  const targets = [...bridgeUrls];
  const tokens: (string | undefined)[] = bridgeUrls.map(() => undefined);
  const active = new Map<number, FaultSpec>();
  const counts = targets.map(() => 0);
  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  const ports: number[] = [];
  // Closing aborts requests still held or in flight, so none lands on the nodes afterwards.
  const closing = new AbortController();

  for (let node = 0; node < targets.length; node++) {
    const rng = createRng(seed).fork(`proxy-${node}`);
    const server = createServer((req, res) => {
      void handle(node, rng, req, res).catch(() => {
        if (!res.headersSent) res.destroy();
      });
    });
    server.keepAliveTimeout = 1_000;
    server.on("connection", (socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    servers.push(server);
    ports.push((server.address() as AddressInfo).port);
  }

  const applies = (fault: FaultSpec, node: number, client: string) =>
    (fault.nodes === undefined || fault.nodes.includes(node)) &&
    (fault.clients === undefined || fault.clients.includes(client));

  async function handle(node: number, rng: Rng, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const client = /^\/c\/([^/]+)/.exec(req.url ?? "")?.[1] ?? "unknown";
    const body = await readBody(req);
    const faults = [...active.values()].filter((f) => applies(f, node, client));
    const has = (kind: FaultSpec["kind"]) => faults.find((f) => f.kind === kind);
    if (has("partition") || has("hang")) return; // never answered; the client's deadline ends it
    const latency = has("latency");
    const delay = latency ? Number(latency.params?.ms ?? 0) + rng.next() * Number(latency.params?.jitterMs ?? 0) : 0;
    const delayPhase = latency?.params?.phase === "request" ? "request" : "response";
    const drop = has("drop");
    const http5xx = has("http-5xx");
    const garbage = has("garbage");
    const applied = (f: FaultSpec | undefined) => f?.params?.applied === true;

    if (drop && !applied(drop)) return void req.socket.destroy();
    if (http5xx && !applied(http5xx)) return void sendHtml503(res);
    if (garbage && !applied(garbage)) return void res.writeHead(200).end(rng.pick(GARBAGE_BODIES));

    if (delay > 0 && delayPhase === "request") await sleep(delay);
    if (closing.signal.aborted) return void req.socket.destroy();
    counts[node] = (counts[node] ?? 0) + 1;
    let upstream: { status: number; text: string };
    try {
      const response = await fetch(`${targets[node]}/`, {
        method: "POST",
        headers: {
          authorization: tokens[node] === undefined ? (req.headers.authorization ?? "") : `Bearer ${tokens[node]}`,
          "content-type": "application/json",
        },
        body,
        signal: AbortSignal.any([AbortSignal.timeout(15_000), closing.signal]),
      });
      upstream = { status: response.status, text: await response.text() };
    } catch {
      upstream = { status: 502, text: '{"error":"fault proxy: upstream unreachable"}' };
    }
    if (delay > 0 && delayPhase === "response") await sleep(delay);
    if (drop) return void req.socket.destroy();
    if (http5xx) return void sendHtml503(res);
    if (garbage) return void res.writeHead(200).end(rng.pick(GARBAGE_BODIES));
    res.writeHead(upstream.status, { "content-type": "application/json" }).end(upstream.text);
  }

  return {
    urlFor: (node, client) => `http://127.0.0.1:${ports[node]}/c/${client}`,
    add(fault) {
      if (PROXY_KINDS.has(fault.kind)) active.set(fault.id, fault);
    },
    remove: (id) => void active.delete(id),
    retarget(node, url, token) {
      targets[node] = url;
      tokens[node] = token;
    },
    forwarded: () => [...counts],
    async close() {
      closing.abort();
      for (const socket of sockets) socket.destroy();
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    },
  };
}

function sendHtml503(res: ServerResponse): void {
  res.writeHead(503, { "content-type": "text/html" }).end("<html><body><h1>503 Service Unavailable</h1></body></html>");
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
