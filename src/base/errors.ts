/**
 * Error classes. Every error carries a stable `code`, a one-line message, the `cause` where
 * there is one, and the per-node outcomes of every attempt, as plain data.
 * @module
 */
import type { AttemptReport, NodeOutcome } from "./report.js";

/** Stable error codes, one per error class. */
export type RedlockErrorCode =
  | "INVALID_ARGUMENT"
  | "CONFIGURATION"
  | "LOCK_HELD"
  | "QUORUM_UNAVAILABLE"
  | "VALIDITY_EXHAUSTED"
  | "ACQUIRE_TIMEOUT"
  | "ABORTED"
  | "LOCK_EXPIRED"
  | "EXTEND_FAILED"
  | "EXTENSION_LIMIT"
  | "LOCK_LOST"
  | "NODE_ERROR"
  | "REQUEST_BUDGET"
  | "RATE_LIMITED"
  | "FENCING_UNINITIALIZED"
  | "FENCING_INIT_REFUSED";

/** Base class of every error this library throws. */
export class RedlockError extends Error {
  /** Stable, machine-readable error code. */
  readonly code: RedlockErrorCode;
  /** Every attempt made by the failed operation, oldest first, each with its per-node outcomes. */
  readonly attempts: readonly AttemptReport[];

  constructor(
    code: RedlockErrorCode,
    message: string,
    options: { cause?: unknown; attempts?: readonly AttemptReport[] } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.attempts = options.attempts ?? [];
  }

  /** The per-node outcomes of the last attempt (empty when no attempt was made). */
  get nodes(): readonly NodeOutcome[] {
    return this.attempts.at(-1)?.nodes ?? [];
  }
}

/** An argument is out of range or of the wrong type (TTL, resource name, option value). Nothing was sent. */
export class InvalidArgumentError extends RedlockError {
  constructor(message: string) {
    super("INVALID_ARGUMENT", message);
  }
}

/**
 * The client is misconfigured: an empty or duplicate node list, a bad URL, a quorum below a
 * majority, or a node that refused our credentials (HTTP 401/403). Retrying cannot help.
 */
export class ConfigurationError extends RedlockError {
  /** The node whose answer revealed the mistake, when there is one. */
  readonly node: string | undefined;
  /** That answer's HTTP status (401, 403), when the mistake came from one: per-node outcomes carry it too. */
  readonly status: number | undefined;
  constructor(
    message: string,
    options: { node?: string; cause?: unknown; attempts?: readonly AttemptReport[]; status?: number } = {},
  ) {
    super("CONFIGURATION", message, options);
    this.node = options.node;
    this.status = options.status;
  }
}

/** The lock is held by someone else on enough nodes that no quorum could be reached. */
export class LockHeldError extends RedlockError {
  /** The nodes that answered "held by another owner" in the last attempt. */
  readonly heldOn: readonly string[];
  constructor(message: string, attempts: readonly AttemptReport[]) {
    super("LOCK_HELD", message, { attempts });
    this.heldOn = (attempts.at(-1)?.nodes ?? []).filter((n) => n.outcome === "held").map((n) => n.node);
  }
}

/** Too many nodes failed (errors, timeouts) for a quorum: an infrastructure problem, not contention. */
export class QuorumUnavailableError extends RedlockError {
  constructor(message: string, attempts: readonly AttemptReport[], cause?: unknown) {
    super("QUORUM_UNAVAILABLE", message, { attempts, cause });
  }
}

/** A quorum said yes, but the round trips used up so much of the TTL that too little validity was left. */
export class ValidityExhaustedError extends RedlockError {
  constructor(message: string, attempts: readonly AttemptReport[]) {
    super("VALIDITY_EXHAUSTED", message, { attempts });
  }
}

/** The overall acquire deadline (`acquireTimeoutMs`) passed before an attempt succeeded. */
export class AcquireTimeoutError extends RedlockError {
  constructor(message: string, attempts: readonly AttemptReport[]) {
    super("ACQUIRE_TIMEOUT", message, { attempts });
  }
}

/**
 * Going on would send more requests than `requestBudget` allows one `acquire()` (its lock's
 * release included): the call gave up, with the lock still held elsewhere or the nodes failing,
 * rather than leave the request without subrequests for its own release (Workers count them).
 * Its `cause` is what the attempts ended in (`LockHeldError`, `QuorumUnavailableError`, …), when
 * one was made.
 */
export class RequestBudgetError extends RedlockError {
  /** The budget: `requestBudget`. */
  readonly budget: number;
  /** Requests the call sent. */
  readonly sent: number;
  constructor(message: string, attempts: readonly AttemptReport[], budget: number, sent: number, cause?: unknown) {
    super("REQUEST_BUDGET", message, { attempts, cause });
    this.budget = budget;
    this.sent = sent;
  }
}

/** The caller's AbortSignal fired. `cause` is the signal's reason. */
export class AbortedError extends RedlockError {
  constructor(message: string, attempts: readonly AttemptReport[], cause: unknown) {
    super("ABORTED", message, { attempts, cause });
  }
}

/** The lock's validity had already run out, so it was not extended (and is not revived). */
export class LockExpiredError extends RedlockError {
  constructor(message: string, attempts: readonly AttemptReport[] = []) {
    super("LOCK_EXPIRED", message, { attempts });
  }
}

/** An extension did not reach a quorum with enough validity. The lock may already be lost. */
export class ExtendError extends RedlockError {
  constructor(message: string, attempts: readonly AttemptReport[], cause?: unknown) {
    super("EXTEND_FAILED", message, { attempts, cause });
  }
}

/** The lock was already extended `maxExtensions` times, or extending would exceed `maxHoldMs`. */
export class ExtensionLimitError extends RedlockError {
  constructor(message: string) {
    super("EXTENSION_LIMIT", message);
  }
}

/**
 * The lock can no longer be trusted: its validity is about to run out with no successful
 * extension, or an extension was refused. This is the `reason` of `lock.signal` when it aborts.
 */
export class LockLostError extends RedlockError {
  constructor(message: string, options: { cause?: unknown; attempts?: readonly AttemptReport[] } = {}) {
    super("LOCK_LOST", message, options);
  }
}

/**
 * One node failed one request: transport failure, an HTTP error status, an unparsable answer or a
 * Redis error reply. It appears as the `error` of a node outcome, never as a grant.
 */
export class NodeError extends RedlockError {
  /** The node's id (its URL without credentials). */
  readonly node: string;
  /** HTTP status of the answer, when there was one. */
  readonly status: number | undefined;
  /** The Redis error text (`{"error": ...}`), when the node answered with one. */
  readonly redisError: string | undefined;
  /** How long the node asked us to wait (`Retry-After` of a 429), in ms, when it said. */
  readonly retryAfterMs: number | undefined;
  constructor(
    node: string,
    message: string,
    options: { status?: number; redisError?: string; cause?: unknown; retryAfterMs?: number } = {},
  ) {
    super("NODE_ERROR", message, { cause: options.cause });
    this.node = node;
    this.status = options.status;
    this.redisError = options.redisError;
    this.retryAfterMs = options.retryAfterMs;
  }

  /** The node refused for its rate or quota: HTTP 429, or a quota error of the provider. */
  get rateLimited(): boolean {
    return this.status === 429 || /\bmax (?:daily |monthly )?requests? limit exceeded/i.test(this.redisError ?? "");
  }
}

/**
 * The nodes refused for their rate or quota (HTTP 429, or a provider's request limit): not
 * contention, and not an outage to page for; retry after `retryAfterMs` when the nodes said.
 */
export class RateLimitedError extends RedlockError {
  /** The longest `Retry-After` the nodes gave, in ms, when any did. */
  readonly retryAfterMs: number | undefined;
  constructor(message: string, attempts: readonly AttemptReport[], retryAfterMs: number | undefined, cause?: unknown) {
    super("RATE_LIMITED", message, { attempts, cause });
    this.retryAfterMs = retryAfterMs;
  }
}

/** The error class of each code: what {@link isRedlockError} narrows an error to. */
export interface RedlockErrorByCode {
  /** {@link InvalidArgumentError} */
  INVALID_ARGUMENT: InvalidArgumentError;
  /** {@link ConfigurationError} */
  CONFIGURATION: ConfigurationError;
  /** {@link LockHeldError} */
  LOCK_HELD: LockHeldError;
  /** {@link QuorumUnavailableError} */
  QUORUM_UNAVAILABLE: QuorumUnavailableError;
  /** {@link ValidityExhaustedError} */
  VALIDITY_EXHAUSTED: ValidityExhaustedError;
  /** {@link AcquireTimeoutError} */
  ACQUIRE_TIMEOUT: AcquireTimeoutError;
  /** {@link AbortedError} */
  ABORTED: AbortedError;
  /** {@link LockExpiredError} */
  LOCK_EXPIRED: LockExpiredError;
  /** {@link ExtendError} */
  EXTEND_FAILED: ExtendError;
  /** {@link ExtensionLimitError} */
  EXTENSION_LIMIT: ExtensionLimitError;
  /** {@link LockLostError} */
  LOCK_LOST: LockLostError;
  /** {@link NodeError} */
  NODE_ERROR: NodeError;
  /** {@link RequestBudgetError} */
  REQUEST_BUDGET: RequestBudgetError;
  /** {@link RateLimitedError} */
  RATE_LIMITED: RateLimitedError;
  /** {@link FencingError} */
  FENCING_UNINITIALIZED: FencingError;
  /** {@link FencingError} */
  FENCING_INIT_REFUSED: FencingError;
}

/**
 * True when `error` is one of this library's errors, optionally with the given code; with a code,
 * it narrows to that code's class (`isRedlockError(e, "LOCK_HELD")` gives `e.heldOn`).
 */
export function isRedlockError(error: unknown): error is RedlockError;
export function isRedlockError<C extends RedlockErrorCode>(error: unknown, code: C): error is RedlockErrorByCode[C];
export function isRedlockError(error: unknown, code?: RedlockErrorCode): error is RedlockError {
  return error instanceof RedlockError && (code === undefined || error.code === code);
}

/**
 * Fencing cannot proceed for a reason retrying will not fix by itself.
 * - `FENCING_UNINITIALIZED`: no node carries an incarnation marker. A brand-new deployment must be
 *   initialised once, explicitly (`initializeFencing`); the library never does it by itself,
 *   because a node that lost its data looks exactly like a fresh one.
 * - `FENCING_INIT_REFUSED`: initialisation was refused: a node already carries a marker (the
 *   deployment was initialised before, so empty nodes are lost nodes and are quarantined and
 *   repaired instead), or a node could not be asked.
 */
export class FencingError extends RedlockError {
  constructor(
    code: "FENCING_UNINITIALIZED" | "FENCING_INIT_REFUSED",
    message: string,
    options: { cause?: unknown; attempts?: readonly AttemptReport[] } = {},
  ) {
    super(code, message, options);
  }
}
