/**
 * Local Redlock test nodes: N independent redis-servers, each behind its own Upstash-compatible
 * REST bridge. See {@link startNodes}; `npm run nodes` is the command-line front end.
 */
export {
  type NodeCluster,
  type NodeInfo,
  type StartNodesOptions,
  startNodes,
} from "./cluster.js";
export { ensureRedisServer, installHint } from "./ensure-redis.js";
export type { OrphanGuardMode } from "./orphan-guard.js";
