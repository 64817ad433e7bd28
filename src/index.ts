/**
 * edge-redlock: the Redlock algorithm over Redis REST endpoints, with nothing but `fetch`.
 * @module
 */

export type { Clock } from "./base/clock.js";
export type { RedlockErrorByCode, RedlockErrorCode } from "./base/errors.js";
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
} from "./base/errors.js";
export type { AttemptReport, NodeOutcome, NodeOutcomeKind, Operation } from "./base/report.js";
export type { SettledResult } from "./core/background.js";
export type { ClusterResetResult } from "./core/fingerprint.js";
export { RESERVED_KEY_PART } from "./core/keys.js";
export type { ReleaseResult, VerifyResult } from "./core/lock.js";
export { Lock } from "./core/lock.js";
export type { RedlockHooks, RedlockOptions, RetryContext } from "./core/options.js";
export {
  DEFAULT_OPTIONS,
  MAX_DELAY_MS,
  MAX_RESOURCE_LENGTH,
  MAX_RESOURCES,
  MAX_TTL_MS,
  OPTION_NAMES,
} from "./core/options.js";
export type {
  AcquireOptions,
  InspectedNode,
  InspectResult,
  NodeConfig,
  RedlockConfig,
  UsingOptions,
} from "./core/redlock.js";
export { Redlock } from "./core/redlock.js";
export type { FencedRefusal } from "./fencing/attempt.js";
export { compareFences, FENCED_SQL_UPDATE, fencedWriteScript } from "./fencing/guard.js";
export type { InitializeFencingResult } from "./fencing/initialize.js";
export type { RedisArgument, RedisNode, RedisReply, RestNodeConfig } from "./transport/rest.js";
export { parseReply, restNode } from "./transport/rest.js";
