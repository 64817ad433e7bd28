/**
 * The harness clock: one time line for every process of a run.
 *
 * Every process (the harness and each client) reads `performance.timeOrigin + performance.now()`:
 * the host's wall clock at the process's start plus a monotonic elapsed time. All processes run on
 * one machine and so share that wall clock; the residual difference between two processes is the
 * error of their `timeOrigin` readings (well under a millisecond on Linux, measured per run by a
 * ping handshake and recorded in the history as `clock-offset`). Within a process the clock is
 * monotonic, so wall-clock steps after start-up do not bend it. redis-server's MONITOR timestamps
 * are read from the same wall clock.
 * @module
 */

/** Milliseconds on the harness clock (fractional). */
export function harnessNow(): number {
  return performance.timeOrigin + performance.now();
}
