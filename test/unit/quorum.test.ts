import { describe, expect, it } from "vitest";
import { budgetSpread, fullJitterDelay, geometricGap } from "../../src/core/backoff.js";
import { decide, driftMs, majority, refusalReason, validityMs } from "../../src/core/quorum.js";

describe("quorum arithmetic", () => {
  it("majority is floor(N/2)+1", () => {
    expect([1, 2, 3, 4, 5, 6, 7].map(majority)).toEqual([1, 2, 2, 3, 3, 4, 4]);
  });

  it("drift is floor(ttl * factor) + 2", () => {
    expect(driftMs(10_000, 0.01)).toBe(102);
    expect(driftMs(999, 0.01)).toBe(11);
    expect(driftMs(1000, 0)).toBe(2);
  });

  it("validity is ttl - elapsed - drift, and can go negative", () => {
    expect(validityMs(10_000, 1000, 1250, 0.01)).toBe(10_000 - 250 - 102);
    expect(validityMs(100, 0, 200, 0.01)).toBe(100 - 200 - 3);
  });

  it("decides a grant at quorum and a refusal once quorum is impossible", () => {
    expect(decide(3, 0, 5, 3)).toBe("granted");
    expect(decide(2, 2, 5, 3)).toBe("undecided");
    expect(decide(2, 3, 5, 3)).toBe("refused");
    // Even N: a 2-2 split on four nodes is a refusal, never a hang.
    expect(decide(2, 2, 4, 3)).toBe("refused");
    expect(decide(2, 1, 4, 3)).toBe("undecided");
  });

  it("calls a refusal contention only when the held nodes alone rule out a quorum", () => {
    expect(refusalReason(["held", "held", "held", "acquired", "acquired"], 3)).toBe("held");
    expect(refusalReason(["held", "held", "error", "error", "acquired"], 3)).toBe("unavailable");
    expect(refusalReason(["held", "held", "held", "pending", "pending"], 3)).toBe("held");
  });
});

describe("full-jitter backoff", () => {
  it("stays within [0, min(max, base * 2^(n-1))]", () => {
    for (let attempt = 1; attempt <= 12; attempt++) {
      const ceiling = Math.min(2000, 100 * 2 ** (attempt - 1));
      expect(fullJitterDelay(attempt, 100, 2000, 0)).toBe(0);
      expect(fullJitterDelay(attempt, 100, 2000, 0.999999)).toBe(ceiling);
      const mid = fullJitterDelay(attempt, 100, 2000, 0.5);
      expect(mid).toBeGreaterThanOrEqual(0);
      expect(mid).toBeLessThanOrEqual(ceiling);
    }
  });

  it("does not overflow for huge attempt numbers", () => {
    expect(fullJitterDelay(10_000, 100, 2000, 0.999999)).toBe(2000);
  });
});

describe("attempts spread over the retry schedule when the budget allows fewer", () => {
  it("none while the budget allows the schedule's attempts", () => {
    expect(budgetSpread(6, 6, 100, 11_000, 100, 2000, 0.5)).toBe(0);
    expect(budgetSpread(9, 6, 100, 11_000, 100, 2000, 0.5)).toBe(0);
  });

  it("the geometric gap to the schedule's end, jittered by ±50 %, at most the max delay", () => {
    const gap = geometricGap(100, 11_000, 3, 100);
    expect(gap).toBeGreaterThan(100);
    expect(budgetSpread(3, 8, 100, 11_000, 100, 100_000, 0.5)).toBeCloseTo(gap, 9);
    expect(budgetSpread(3, 8, 100, 11_000, 100, 100_000, 0)).toBeCloseTo(gap / 2, 9);
    expect(budgetSpread(3, 8, 100, 11_000, 100, 100_000, 0.999)).toBeCloseTo(gap * 1.499, 9);
    expect(budgetSpread(3, 8, 100, 11_000, 100, 250, 0.999)).toBe(250);
    // Fewer attempts, wider gaps; none left: the rest of the schedule (capped).
    expect(budgetSpread(2, 8, 100, 11_000, 100, 100_000, 0.5)).toBeGreaterThan(gap);
    expect(budgetSpread(0, 8, 100, 11_000, 100, 2000, 0.5)).toBe(2000);
  });
});
