/**
 * A small HTTP proxy on a free loopback port in front of REST nodes: it forwards each request as
 * it came (headers and body) to the node a rule picks, or answers it itself.
 */
import type { IncomingMessage } from "node:http";
import { type Stub, startStub } from "./http-stub.js";

/** One request as the proxy received it. */
export interface ProxiedRequest {
  readonly authorization: string;
  readonly body: string;
}

/** Where a request goes: a node's base URL, or an answer of the proxy's own. */
export type Route = { forward: string } | { answer: { status: number; body: string } };

async function readBody(req: IncomingMessage): Promise<string> {
  let body = "";
  for await (const chunk of req) body += chunk;
  return body;
}

/** Start a proxy whose `route` decides, per request, where it goes. */
export async function startProxy(route: (request: ProxiedRequest) => Route): Promise<Stub> {
  return startStub((req, res) => {
    void (async () => {
      try {
        const request = { authorization: String(req.headers.authorization ?? ""), body: await readBody(req) };
        const to = route(request);
        if ("answer" in to) {
          res.writeHead(to.answer.status, { "content-type": "application/json" }).end(to.answer.body);
          return;
        }
        const response = await fetch(to.forward, {
          method: "POST",
          headers: { authorization: request.authorization, "content-type": "application/json" },
          body: request.body,
        });
        res.writeHead(response.status, { "content-type": "application/json" }).end(await response.text());
      } catch {
        res.writeHead(502, { "content-type": "text/plain" }).end("proxy failure");
      }
    })();
  });
}
