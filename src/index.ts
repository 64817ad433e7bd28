/**
 * edge-redlock: the Redlock algorithm over Redis REST endpoints, with nothing but `fetch`.
 * Optional pieces live behind their own subpaths: `edge-redlock/fencing`, `edge-redlock/upstash`,
 * `edge-redlock/hono`; `edge-redlock/core` is the plain preset (backoff alone). `Semaphore` and
 * `ReadWriteLock` are named exports a bundler drops when unused.
 * @module edge-redlock
 */
export * from "./core/index.js";
export type { Script } from "./core/scripts/script.js";
export type { FencedRefusal } from "./fencing/attempt.js";
export { compareFences, FENCED_SQL_UPDATE, fencedWriteScript } from "./fencing/guard.js";
export type { InitializeFencingResult } from "./fencing/initialize.js";
export * from "./preflight/index.js";
export { ReadWriteLock } from "./primitives/rw-lock.js";
export { MAX_PERMITS, Semaphore } from "./primitives/semaphore.js";
export { Redlock } from "./redlock.js";
