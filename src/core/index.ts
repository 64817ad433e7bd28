/**
 * `edge-redlock/core`: the plain preset. The same `Redlock`, `Lock` and errors as `edge-redlock`,
 * with waiting by backoff alone (as node-redlock waits): fan-outs to every node with full-jitter
 * delays in between while the lock is held elsewhere. For bundles that count bytes; the default
 * entry waits in line at a gate node instead (one request per poll, first come first served).
 * @module edge-redlock/core
 */

export type { Clock } from "../base/clock.js";
export type { RedlockErrorByCode, RedlockErrorCode } from "../base/errors.js";
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
  RateLimitedError,
  RedlockError,
  RequestBudgetError,
  ValidityExhaustedError,
} from "../base/errors.js";
export type { AttemptReport, NodeOutcome, NodeOutcomeKind, Operation } from "../base/report.js";
export type { RedisArgument, RedisNode, RedisReply, RestNodeConfig } from "../transport/rest.js";
export { parseReply, restNode } from "../transport/rest.js";
export type { SettledResult } from "./background.js";
export type { ClusterResetResult } from "./fingerprint.js";
export { RESERVED_KEY_PART } from "./keys.js";
export type { ReleaseResult, VerifyResult } from "./lock.js";
export { Lock } from "./lock.js";
export type { Fencing, RedlockHooks, RedlockOptions, ResolvedOptions, RetryContext } from "./options.js";
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
  InspectOptions,
  InspectResult,
  NodeConfig,
  RedlockConfig,
  UsingOptions,
} from "./redlock.js";
export { Redlock } from "./redlock.js";
