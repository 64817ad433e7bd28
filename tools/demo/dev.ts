/**
 * `npm run dev`: local nodes + the demo worker under wrangler dev, kept running for manual use.
 * Prints example curl commands; Ctrl-C stops everything.
 */
import { startDemoStack } from "./worker-dev.js";

const stack = await startDemoStack();
const auth = `-H 'authorization: Bearer ${stack.secret}'`;
console.log(`Demo worker: ${stack.url}  (API secret ${stack.secret})
Nodes:
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
