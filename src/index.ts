/**
 * edge-redlock: the Redlock algorithm over Redis REST endpoints, with nothing but `fetch`.
 * @module
 */

export type { SettledResult } from "./background.js";
export type { Clock } from "./clock.js";
export type { RedlockErrorByCode, RedlockErrorCode } from "./errors.js";
export {
  AbortedError,
  AcquireTimeoutError,
  ConfigurationError,
  ExtendError,
  ExtensionLimitError,
  FencingError,
  InvalidArgumentError,
  isRedlockError,
  LockExpiredError,
  LockHeldError,
  LockLostError,
  NodeError,
  QuorumUnavailableError,
  RedlockError,
  ValidityExhaustedError,
} from "./errors.js";
export type { FencedRefusal } from "./fencing/attempt.js";
export { compareFences, FENCED_SQL_UPDATE, fencedWriteScript } from "./fencing/guard.js";
export type { InitializeFencingResult } from "./fencing/initialize.js";
export type { ClusterResetResult } from "./fingerprint.js";
export { RESERVED_KEY_PART } from "./keys.js";
export type { ReleaseResult, VerifyResult } from "./lock.js";
export { Lock } from "./lock.js";
export type { RedlockHooks, RedlockOptions, RetryContext } from "./options.js";
export {
  DEFAULT_OPTIONS,
  MAX_DELAY_MS,
  MAX_RESOURCE_LENGTH,
  MAX_RESOURCES,
  MAX_TTL_MS,
  OPTION_NAMES,
} from "./options.js";
export type {
  AcquireOptions,
  InspectedNode,
  InspectResult,
  NodeConfig,
  RedlockConfig,
  UsingOptions,
} from "./redlock.js";
export { Redlock } from "./redlock.js";
export type { AttemptReport, NodeOutcome, NodeOutcomeKind, Operation } from "./report.js";
export type { RedisArgument, RedisNode, RedisReply, RestNodeConfig } from "./transport.js";
export { parseReply, restNode } from "./transport.js";
