/**
 * A local server speaking the Upstash Redis REST protocol in front of a real redis-server, for
 * tests and local development. See {@link startBridge}.
 */

export type { DelayPhase, DelaySpec } from "./app.js";
export { UNAUTHORIZED_MESSAGE } from "./auth.js";
export { type Bridge, type BridgeOptions, startBridge } from "./bridge.js";
