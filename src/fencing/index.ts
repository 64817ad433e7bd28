/**
 * Quorum fencing tokens for Redlock: a token per grant, unique and increasing in real-time order
 * across grants of the same resources, and the server-enforced quarantine of nodes that lost
 * their data. See `docs/fencing.md` for the user's view and `attempt.ts` for the arguments.
 * @module
 */
export { assertQuarantineCovers, fencingQuorum, proposeFence, raiseFence } from "./arithmetic.js";
export {
  type FencedAttemptOptions,
  type FencedAttemptResult,
  type FencedRefusal,
  type FencePhaseReport,
  fencedAttempt,
} from "./attempt.js";
export { compareFences, FENCED_SQL_UPDATE, fencedWriteScript } from "./guard.js";
export {
  type InitializeFencingOptions,
  type InitializeFencingResult,
  initializeFencing,
} from "./initialize.js";
export { type FencingKeys, fencingKeys, isReservedResource, RESERVED_KEY_PART } from "./keys.js";
export { MAX_FENCE } from "./lua.js";
export { type MaintenanceReport, maintainNodes } from "./maintenance.js";
export { type FenceReply, type FenceStatus, parseFence, parseFenceReply } from "./replies.js";
