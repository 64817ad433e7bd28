/**
 * `npm run dev [-- --inspect] [--port N]`: local nodes + the demo worker in workerd, kept running
 * for manual use. Prints example curl commands; Ctrl-C stops everything.
 *
 * `--inspect` opens workerd's DevTools inspector on 127.0.0.1:9229, with no proxy in between
 * (wrangler dev's inspector proxy is what fell over under the demo's load). With DevTools attached
 * every outgoing request of the worker becomes an event: attach it to step through a few requests.
 * With or without the flag, the worker takes the same load as `npm run demo`.
 */
import { parseArgs } from "node:util";
import { startDemoStack } from "./worker-dev.js";

const { values } = parseArgs({
  options: {
    inspect: { type: "boolean", default: false },
    port: { type: "string", default: "0" },
  },
});
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65_535) {
  console.error(`--port must be a port number, got ${values.port}`);
  process.exit(2);
}

const stack = await startDemoStack({ inspector: values.inspect, port });
const auth = `-H 'authorization: Bearer ${stack.secret}'`;
console.log(`Demo worker: ${stack.url}  (API secret ${stack.secret})
${stack.inspectorUrl ? `DevTools inspector: ${stack.inspectorUrl} (attach DevTools to step through a few requests)\n` : ""}Nodes:
${stack.cluster.nodes.map((n) => `  ${n.url}  token ${n.token}`).join("\n")}

Try:
  curl -s -X POST ${auth} -d '{"ttlMs":30000}' ${stack.url}/locks/invoice:42
  curl -s ${auth} ${stack.url}/locks/invoice:42
  curl -s -X POST ${auth} -d '{"token":"<token>","ttlMs":30000}' ${stack.url}/locks/invoice:42/extend
  curl -s -X DELETE ${auth} -d '{"token":"<token>"}' ${stack.url}/locks/invoice:42
  curl -s -X POST ${auth} ${stack.url}/counter/hits/increment
  curl -s -X POST ${auth} '${stack.url}/counter/hits/increment?unsafe=1'
  curl -s ${auth} ${stack.url}/counter/hits

Ctrl-C stops the worker and the nodes.`);

let stopping = false;
const shutdown = () => {
  if (stopping) return;
  stopping = true;
  void stack.stop().then(() => process.exit(0));
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
