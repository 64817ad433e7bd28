/** Seeded randomness for the unit tests: runs that draw numbers repeat exactly. */
import { vi } from "vitest";

/** A generator of uniform numbers in [0, 1) from `seed` (mulberry32): the same seed, the same sequence. */
export function seededRandom(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `Math.random` draws from {@link seededRandom} until `vi.restoreAllMocks()` or the returned restore. */
export function seedMathRandom(seed: number): () => void {
  const spy = vi.spyOn(Math, "random").mockImplementation(seededRandom(seed));
  return () => spy.mockRestore();
}
