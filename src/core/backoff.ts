/**
 * Delay between acquire attempts: full-jitter capped exponential backoff. Full jitter spreads
 * contending clients out best, so they stop colliding in lockstep.
 * @module
 */

/**
 * The delay after failed attempt `attempt` (1-based): uniform in `[0, min(maxMs, baseMs * 2^(attempt-1))]`.
 * @param random a uniform number in [0, 1), e.g. `Math.random()`.
 */
export function fullJitterDelay(attempt: number, baseMs: number, maxMs: number, random: number): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(attempt - 1, 52));
  return Math.floor(random * (ceiling + 1));
}
