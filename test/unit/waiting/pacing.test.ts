/**
 * The timing arithmetic of waiting, as tables: each row an input and the figure the waiter acts on
 * (the fake-time simulations in the other files of this folder check what these figures add up to on
 * the nodes). Where randomness enters, seeded draws.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { patience } from "../../../src/core/backoff.js";
import {
  averageHold,
  averageRtt,
  budgetGap,
  distanceRtt,
  FRONT_POLLS_PER_TURN,
  FRONT_POLLS_RESERVE,
  type GateFigures,
  gateNearerThanQuorum,
  gateReleaseDelay,
  hotWindow,
  isOverdue,
  leaseFor,
  MAX_POLL_MS,
  MAX_SLEEP_MS,
  margin,
  nextOverdue,
  offerWindowEnd,
  patientPace,
  placeholderMs,
  pollInterval,
  quorumRtt,
  rateGap,
  releaseImminent,
  releaseInReach,
  retryHeld,
  SPACING_TURNS,
  sleepAtHead,
  sleepBehind,
  spacingHorizon,
  spreadCap,
  takeDelays,
  unspacedAtFront,
} from "../../../src/waiting/pacing.js";
import { seededRandom } from "../support/random.js";

/** A gate's answer: a line that learned 50 ms holds, the keys held with 3 s to go, released in 30 ms. */
function figures(overrides: Partial<GateFigures> = {}): GateFigures {
  return { rank: 1, pttlMs: 3000, freeInMs: 30, holdMs: 50, holdDeviationMs: 0, cycleMs: 0, turns: 7, ...overrides };
}

describe("pollInterval: an eighth of the hold, a round trip while none is known, within 5–100 ms", () => {
  it.each([
    { holdMs: 0, rttMs: 0, expected: 5 },
    { holdMs: 0, rttMs: 40, expected: 40 },
    { holdMs: 0, rttMs: 500, expected: 100 },
    { holdMs: 16, rttMs: 40, expected: 5 },
    { holdMs: 80, rttMs: 999, expected: 10 },
    { holdMs: 1600, rttMs: 0, expected: 100 },
  ])("hold $holdMs, rtt $rttMs → $expected", ({ holdMs, rttMs, expected }) => {
    expect(pollInterval(holdMs, rttMs)).toBe(expected);
  });
});

/** The most polls any window of a second holds, in a list of send times (oldest first). */
function densestSecond(times: readonly number[]): number {
  let most = 0;
  for (let i = 0; i < times.length; i++) {
    let j = i;
    while (j < times.length && (times[j] as number) < (times[i] as number) + 1000) j++;
    most = Math.max(most, j - i);
  }
  return most;
}

describe("rateGap: 50 ms apart and at most 10 polls in any second (20 ms to spare), 500 ms apart more than 6 turns back", () => {
  const tenEvery50ms = Array.from({ length: 10 }, (_, i) => 1000 + 50 * i);
  it.each([
    // No poll yet: at once.
    { polls: [], now: 0, rank: -1, expected: 0 },
    // Fewer polls than the limit in the last second: 50 ms after the last one.
    { polls: [1000, 1030], now: 1040, rank: 1, expected: 40 },
    { polls: [1000, 1030], now: 1100, rank: 1, expected: 0 },
    { polls: tenEvery50ms.slice(1), now: 1500, rank: 0, expected: 0 },
    // Ten in the window: until the oldest of them is a second old, and 20 ms more.
    { polls: tenEvery50ms, now: 1500, rank: 0, expected: 520 },
    { polls: tenEvery50ms, now: 2100, rank: 0, expected: 0 },
    // More than 6 turns back: half a second from the last poll.
    { polls: [1000], now: 1010, rank: 7, expected: 490 },
    { polls: [1000, 1300], now: 1900, rank: 7, expected: 0 },
    { polls: [1000, 1300], now: 1310, rank: 6, expected: 40 },
  ])("$polls.length polls, now $now, rank $rank → $expected", ({ polls, now, rank, expected }) => {
    expect(rateGap(polls, now, rank)).toBe(expected);
  });

  it("a waiter that polls whenever it likes within it never has more in a second (seeded wishes)", () => {
    const random = seededRandom(41);
    let bursts = 0;
    for (let run = 0; run < 200; run++) {
      const farBack = random() < 0.3;
      const rank = farBack ? 7 + Math.floor(random() * 20) : Math.floor(random() * 7);
      const sent: number[] = [];
      let t = 0;
      for (let poll = 0; poll < 60; poll++) {
        // Wishes from 1 to 150 ms after the last poll: many closer than a 100 ms gap would allow.
        t += 1 + random() * 150;
        t += rateGap(sent.slice(-10), t, rank);
        if (sent.length > 0 && t - (sent.at(-1) as number) < 100) bursts++;
        if (sent.length > 0 && !farBack) expect(t - (sent.at(-1) as number)).toBeGreaterThanOrEqual(50);
        sent.push(t);
      }
      expect(densestSecond(sent)).toBeLessThanOrEqual(farBack ? 2 : 10);
      if (farBack)
        for (let i = 1; i < sent.length; i++)
          expect((sent[i] as number) - (sent[i - 1] as number)).toBeGreaterThanOrEqual(500);
    }
    // The window let polls closer than 100 ms through, which a least gap would not have.
    expect(bursts).toBeGreaterThan(100);
  });

  it("the window check catches a schedule with 11 polls in a second (negative control)", () => {
    expect(densestSecond(Array.from({ length: 11 }, (_, i) => 90 * i))).toBe(11);
    expect(densestSecond(Array.from({ length: 11 }, (_, i) => 100 * i))).toBe(10);
  });
});

describe("budgetGap: wider as a short budget asks, 5 ms with requests to spare", () => {
  it.each([
    // No budget, or nothing left to wait for: the least poll interval.
    { waitedMs: 0, waitLeftMs: 11_100, pollsLeft: Infinity, expected: 5 },
    { waitedMs: 2000, waitLeftMs: 0, pollsLeft: 10, expected: 5 },
    // A budget of 25 polls over 11 s, from the start: spaced geometrically from 100 ms waited.
    { waitedMs: 0, waitLeftMs: 11_000, pollsLeft: 25, expected: 100 * (111 ** (1 / 25) - 1) },
    { waitedMs: 2000, waitLeftMs: 9000, pollsLeft: 10, expected: 2000 * (5.5 ** 0.1 - 1) },
    // No poll left: the rest of the waiting.
    { waitedMs: 2000, waitLeftMs: 3000, pollsLeft: 0, expected: 3000 },
  ])("waited $waitedMs, $waitLeftMs left, $pollsLeft polls → $expected", (c) => {
    expect(budgetGap(c.waitedMs, c.waitLeftMs, c.pollsLeft)).toBeCloseTo(c.expected, 6);
  });

  it("makes the polls left last to the end of the waiting (seeded waits)", () => {
    const random = seededRandom(29);
    let budgetsSpent = 0;
    for (let run = 0; run < 200; run++) {
      const total = 1000 + random() * 30_000;
      let pollsLeft = Math.floor(5 + random() * 40);
      let t = 0;
      while (t < total && pollsLeft > 0) {
        const gap = budgetGap(t, total - t, pollsLeft);
        expect(gap).toBeGreaterThanOrEqual(5);
        t += gap;
        pollsLeft--;
      }
      // The polls ran out no sooner than the waiting did (within a rounding).
      if (pollsLeft === 0) {
        budgetsSpent++;
        expect(t).toBeGreaterThanOrEqual(total * 0.999);
      }
    }
    // The sample has waits the budget must stretch to cover, not only short ones.
    expect(budgetsSpent).toBeGreaterThan(20);
  });
});

describe("spacingHorizon: four times the wait the line's pace predicts, and four times the holder's overrun", () => {
  it.each([
    // A turn: the line's interval between releases, or a hold and two round trips when longer.
    { rank: 0, holdMs: 50, cycleMs: 0, rttMs: 20, overdueForMs: 0, expected: SPACING_TURNS * 90 },
    { rank: 2, holdMs: 50, cycleMs: 80, rttMs: 20, overdueForMs: 0, expected: SPACING_TURNS * 3 * 90 },
    { rank: 2, holdMs: 50, cycleMs: 200, rttMs: 20, overdueForMs: 0, expected: SPACING_TURNS * 3 * 200 },
    // Behind a holder past its prediction, longer as the overrun grows.
    { rank: 0, holdMs: 50, cycleMs: 90, rttMs: 20, overdueForMs: 30, expected: SPACING_TURNS * 120 },
    { rank: 0, holdMs: 50, cycleMs: 90, rttMs: 20, overdueForMs: 5000, expected: SPACING_TURNS * 5090 },
    // The line's pace unknown (before an answer, no hold recorded): no horizon but the wait's own end.
    { rank: -1, holdMs: 50, cycleMs: 90, rttMs: 20, overdueForMs: 0, expected: Infinity },
    { rank: 3, holdMs: 0, cycleMs: 0, rttMs: 20, overdueForMs: 0, expected: Infinity },
  ])(
    "place $rank, holds of $holdMs, releases $cycleMs apart, round trips of $rttMs, overdue for $overdueForMs → $expected",
    (c) => {
      expect(spacingHorizon(c.rank, c.holdMs, c.cycleMs, c.rttMs, c.overdueForMs)).toBe(c.expected);
    },
  );

  it("late in a long wait, a waiter near the front of a moving line polls within two turns, where the patience spaced it about a second apart", () => {
    // 7 polls left, 6 s waited, third in a line of 50 ms holds 20 ms away; the patience (11.1 s)
    // starts again each time the line moves.
    const waited = 6000;
    const overPatience = budgetGap(waited, 11_100, 7);
    const overHorizon = budgetGap(waited, Math.min(11_100, spacingHorizon(2, 50, 90, 20)), 7);
    expect(overPatience).toBeGreaterThan(900);
    expect(overHorizon).toBeLessThan(2 * 90);
  });
});

describe("unspacedAtFront: the first 3 polls of a turn in second place or first, while more than 8 polls are left", () => {
  it.each([
    { rank: 0, frontPolls: 0, pollsLeft: 20, expected: true },
    { rank: 1, frontPolls: FRONT_POLLS_PER_TURN - 1, pollsLeft: FRONT_POLLS_RESERVE + 1, expected: true },
    { rank: 1, frontPolls: FRONT_POLLS_PER_TURN, pollsLeft: 20, expected: false },
    { rank: 0, frontPolls: 0, pollsLeft: FRONT_POLLS_RESERVE, expected: false },
    { rank: 2, frontPolls: 0, pollsLeft: 20, expected: false },
    { rank: -1, frontPolls: 0, pollsLeft: 20, expected: false },
  ])("place $rank, $frontPolls polls this turn, $pollsLeft left: $expected", (c) => {
    expect(unspacedAtFront(c.rank, c.frontPolls, c.pollsLeft)).toBe(c.expected);
  });
});

describe("margin: twice the holds' deviation, at least 2 ms, at most a quarter round trip", () => {
  it.each([
    { deviation: 0, rttMs: 40, expected: 2 },
    { deviation: 3, rttMs: 40, expected: 6 },
    { deviation: 10, rttMs: 40, expected: 10 },
    { deviation: 0, rttMs: 4, expected: 1 },
  ])("deviation $deviation, rtt $rttMs → $expected", ({ deviation, rttMs, expected }) => {
    expect(margin(deviation, rttMs)).toBe(expected);
  });
});

describe("distanceRtt: a node's round trip, following shorter samples fast and longer ones slowly", () => {
  it.each([
    { average: 0, sample: 80, expected: 80 },
    { average: 80, sample: 40, expected: 60 },
    { average: 80, sample: 160, expected: 90 },
    { average: 80, sample: 80, expected: 80 },
  ])("$average then $sample → $expected", ({ average, sample, expected }) => {
    expect(distanceRtt(average, sample)).toBe(expected);
  });

  it("a node 2 ms away stays under the noise threshold through a spike of 40 ms every fifth answer", () => {
    let rtt = 0;
    let highest = 0;
    for (let i = 0; i < 200; i++) {
      rtt = distanceRtt(rtt, i % 5 === 4 ? 40 : 2);
      highest = Math.max(highest, rtt);
    }
    // Beside a node that always answers in 2 ms, the difference of one-way times stays under 4 ms.
    expect(highest / 2 - 1).toBeLessThan(4);
  });
});

describe("gateReleaseDelay: the gate's part waits until the release could have reached a quorum", () => {
  // Round trips from eu-west-1 to the bench's geo nodes (us-east-1, eu-west-1, us-west-2, eu-central-1, us-west-1).
  const euWest = [80.52, 4, 137, 19.56, 153.2];
  it.each([
    {
      what: "the gate next door: until the third nearest (40.26 ms one way) is reached",
      rtts: euWest,
      gate: 1,
      expected: 38.26,
    },
    { what: "the gate is the third nearest", rtts: euWest, gate: 0, expected: 0 },
    { what: "the gate is farther than a quorum", rtts: euWest, gate: 2, expected: 0 },
    { what: "capped", rtts: euWest, gate: 1, maxMs: 25, expected: 25 },
    { what: "differences under 4 ms are noise", rtts: [20, 21, 24, 26, 27], gate: 0, expected: 0 },
    { what: "a node not heard from yet", rtts: [80.52, 4, 0, 19.56, 153.2], gate: 1, expected: 0 },
    { what: "fewer round trips known than nodes", rtts: [80.52, 4, 137], gate: 1, expected: 0 },
  ])("$what → $expected", ({ rtts, gate, maxMs, expected }) => {
    expect(gateReleaseDelay(rtts, 5, gate, 3, maxMs ?? 250)).toBeCloseTo(expected, 6);
  });
});

describe("gateNearerThanQuorum: a take that came early asks again in its attempt only when the gate is far nearer than a quorum", () => {
  it.each([
    {
      what: "eu-west-1, the gate next door (2 ms) and the quorum 40 ms away",
      rtts: [80.52, 4, 137, 19.56, 153.2],
      gate: 1,
      expected: true,
    },
    { what: "eu-west-1, the gate as far as the quorum", rtts: [80.52, 4, 137, 19.56, 153.2], gate: 0, expected: false },
    { what: "nodes that stand alike", rtts: [20, 21, 24, 26, 27], gate: 0, expected: false },
    {
      what: "loopback, where twice a tiny figure is still noise",
      rtts: [0.4, 1, 1.2, 1.5, 3],
      gate: 0,
      expected: false,
    },
    { what: "a node not heard from yet", rtts: [80.52, 4, 0, 19.56, 153.2], gate: 1, expected: false },
  ])("$what → $expected", ({ rtts, gate, expected }) => {
    expect(gateNearerThanQuorum(rtts, 5, gate, 3)).toBe(expected);
  });
});

describe("quorumRtt: our round trip to the quorum-th nearest node", () => {
  it.each([
    { what: "eu-west-1: the third nearest of five", rtts: [80.52, 4, 137, 19.56, 153.2], quorum: 3, expected: 80.52 },
    { what: "the same nodes, a quorum of four", rtts: [80.52, 4, 137, 19.56, 153.2], quorum: 4, expected: 137 },
    { what: "a node not heard from yet", rtts: [80.52, 4, 0, 19.56, 153.2], quorum: 3, expected: undefined },
    { what: "fewer round trips than nodes", rtts: [80.52, 4], quorum: 3, expected: undefined },
  ])("$what → $expected", ({ rtts, quorum, expected }) => {
    expect(quorumRtt(rtts, 5, quorum)).toBe(expected);
  });
});

describe("takeDelays: a take's requests leave so that all land at once, the farthest node's first", () => {
  it("sends each node its request the difference of one-way times after the farthest's", () => {
    // From us-west-2: the farthest node (eu-central-1, 159.5 ms) first, the node next door last.
    expect(takeDelays([88.68, 137, 4, 159.5, 19.2], 5)).toEqual(
      [35.41, 11.25, 77.75, 0, 70.15].map((d) => expect.closeTo(d, 6)),
    );
  });

  it("lands every request at the same moment, for any round trips (seeded)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 400 }), { minLength: 5, maxLength: 5 }), (rtts) => {
        const delays = takeDelays(rtts, 5);
        if (delays === undefined) return Math.max(...rtts) - Math.min(...rtts) < 8;
        const landed = delays.map((d, i) => d + (rtts[i] as number) / 2);
        return Math.max(...landed) - Math.min(...landed) < 1e-9 && Math.min(...delays) === 0;
      }),
      { seed: 29 },
    );
  });

  it("sends all at once while a node is unknown or the nodes stand alike", () => {
    expect(takeDelays([88.68, 0, 4, 159.5, 19.2], 5)).toBeUndefined();
    expect(takeDelays([20, 22, 23, 21, 27], 5)).toBeUndefined();
    expect(takeDelays([20, 22], 5)).toBeUndefined();
  });
});

describe("patientPace: half the time waited, from the interval up to 100 ms, never past the key's PTTL", () => {
  it.each([
    { interval: 10, waited: 0, expires: -1, expected: 10 },
    { interval: 10, waited: 60, expires: -1, expected: 30 },
    { interval: 10, waited: 1000, expires: -1, expected: 100 },
    { interval: 10, waited: 1000, expires: 40, expected: 40 },
    { interval: 10, waited: 1000, expires: 0, expected: 100 },
  ])("interval $interval, waited $waited, PTTL $expires → $expected", ({ interval, waited, expires, expected }) => {
    expect(patientPace(interval, waited, expires)).toBe(expected);
  });
});

describe("sleepAtHead: the first in line polls at a poll interval near a release, else at a patient pace", () => {
  // Holds of 80 ms: a poll interval of 10 ms.
  it.each([
    {
      why: "release within an interval",
      answer: { rank: 0, holdMs: 80, freeInMs: 5 },
      first: 0,
      overdue: undefined,
      expected: 10,
    },
    {
      why: "release further off, just became first",
      answer: { rank: 0, holdMs: 80, freeInMs: 500 },
      first: 0,
      overdue: undefined,
      expected: 10,
    },
    {
      why: "release further off, first for 60 ms",
      answer: { rank: 0, holdMs: 80, freeInMs: 500 },
      first: 60,
      overdue: undefined,
      expected: 30,
    },
    {
      why: "release further off, first for a second: 10 polls a second",
      answer: { rank: 0, holdMs: 80, freeInMs: 500 },
      first: 1000,
      overdue: undefined,
      expected: 100,
    },
    {
      why: "no release before the prediction: never past it",
      answer: { rank: 0, holdMs: 80, freeInMs: 70 },
      first: 1000,
      overdue: undefined,
      expected: 70,
    },
    {
      why: "overdue holder, just now",
      answer: { rank: 0, holdMs: 80, freeInMs: 0 },
      first: 900,
      overdue: 0,
      expected: 10,
    },
    {
      why: "overdue holder for 400 ms: 10 polls a second",
      answer: { rank: 0, holdMs: 80, freeInMs: 0 },
      first: 900,
      overdue: 400,
      expected: 100,
    },
    {
      why: "overdue holder whose key runs out in 30 ms",
      answer: { rank: 0, holdMs: 80, freeInMs: 0, pttlMs: 30 },
      first: 900,
      overdue: 400,
      expected: 30,
    },
    {
      why: "no hold recorded (10 s key, died): a round trip, then patient",
      answer: { rank: 0, holdMs: 0, freeInMs: 9000, pttlMs: 9000 },
      first: 0,
      overdue: undefined,
      expected: 20,
    },
    {
      why: "no hold recorded, first for 2 s",
      answer: { rank: 0, holdMs: 0, freeInMs: 9000, pttlMs: 9000 },
      first: 2000,
      overdue: undefined,
      expected: 100,
    },
  ])("$why → $expected", ({ answer, first, overdue, expected }) => {
    expect(sleepAtHead(figures(answer), 20, first, overdue)).toBe(expected);
  });
});

describe("sleepBehind: a waiter behind the first wakes once the waiter ahead should have taken the lock", () => {
  // Round trip 20 ms; holds of 50 ms (interval 6.25, margin 2, a turn of 52, settling 11.33).
  it.each([
    {
      why: "no hold recorded, 10th: half a round trip per place",
      answer: { rank: 10, holdMs: 0 },
      random: 0,
      expected: 100,
    },
    {
      why: "no hold recorded, 40th: capped by the spread cap (draw 0)",
      answer: { rank: 40, holdMs: 0 },
      random: 0,
      expected: 300,
    },
    { why: "no hold recorded, 40th (draw 0.5)", answer: { rank: 40, holdMs: 0 }, random: 0.5, expected: 400 },
    { why: "no hold recorded, 2nd: at least a poll interval", answer: { rank: 2, holdMs: 0 }, random: 0, expected: 20 },
    {
      why: "second: the release, settling, less a round trip",
      answer: { rank: 1 },
      random: 0,
      expected: 30 + 34 / 3 - 20,
    },
    { why: "fourth: two turns more", answer: { rank: 3 }, random: 0, expected: 30 + 2 * 52 + 34 / 3 - 20 },
    {
      why: "fourth, a measured pace of 60 ms: a turn of 57 at most",
      answer: { rank: 3, cycleMs: 60 },
      random: 0,
      expected: 30 + 2 * 57 + 34 / 3 - 20,
    },
    {
      why: "far back (11th): a turn early and a little more",
      answer: { rank: 10 },
      random: 0,
      expected: 30 + 9 * 52 - 52 * (1 + 9 / 32) + 34 / 3 - 20,
    },
    {
      why: "holds that vary (deviation 20 of 50): sooner, in proportion",
      answer: { rank: 3, holdDeviationMs: 20 },
      random: 0,
      expected: (30 + 2 * 55) * 0.8 + 5 + 25 / 3 - 20,
    },
    {
      why: "the lock due now, second: at least a poll interval",
      answer: { rank: 1, freeInMs: 0, pttlMs: -2 },
      random: 0,
      expected: 6.25,
    },
    {
      why: "behind an overdue holder for 400 ms: no sooner than the first in line's patient pace",
      answer: { rank: 2, freeInMs: 0 },
      random: 0,
      expected: 100,
      overdue: 400,
    },
    { why: "60th: capped (draw 0)", answer: { rank: 60 }, random: 0, expected: 1200 },
    { why: "60th: capped (draw 0.5)", answer: { rank: 60 }, random: 0.5, expected: 1600 },
  ])("$why → $expected", ({ answer, random, expected, overdue }) => {
    expect(sleepBehind(figures(answer), 20, overdue, random)).toBeCloseTo(expected, 9);
  });

  it.each([
    { why: "no hold recorded, 4th, the quorum 150 ms away: half of that per place", rank: 3, expected: 225 },
    { why: "no hold recorded, 10th: capped by the spread cap (draw 0)", rank: 10, expected: 300 },
    {
      why: "no hold recorded, 2nd, a quorum nearer than the gate: a poll interval",
      rank: 1,
      quorumRttMs: 10,
      expected: 20,
    },
  ])("$why → $expected", ({ rank, quorumRttMs = 150, expected }) => {
    expect(sleepBehind(figures({ rank, holdMs: 0 }), 20, undefined, 0, quorumRttMs)).toBeCloseTo(expected, 9);
  });

  it("paces by the quorum's round trip only while no hold is recorded", () => {
    for (const rank of [1, 3, 8, 40]) {
      expect(sleepBehind(figures({ rank }), 20, undefined, 0, 150)).toBe(
        sleepBehind(figures({ rank }), 20, undefined, 0),
      );
    }
  });

  it("for any answer, sleeps between a poll interval and the longest sleep; the first in line at most 100 ms", () => {
    const answer = fc.record({
      rank: fc.integer({ min: 1, max: 200 }),
      pttlMs: fc.oneof(fc.constant(-2), fc.constant(-1), fc.integer({ min: 1, max: 60_000 })),
      freeInMs: fc.integer({ min: 0, max: 60_000 }),
      holdMs: fc.integer({ min: 0, max: 30_000 }),
      holdDeviationMs: fc.integer({ min: 0, max: 30_000 }),
      cycleMs: fc.integer({ min: 0, max: 30_000 }),
      turns: fc.nat(),
    });
    const overdue = fc.option(fc.integer({ min: 0, max: 60_000 }), { nil: undefined });
    fc.assert(
      fc.property(
        answer,
        fc.integer({ min: 0, max: 2_000 }),
        overdue,
        fc.double({ min: 0, max: 0.999, noNaN: true }),
        (a, rtt, late, random) => {
          const interval = pollInterval(a.holdMs, rtt);
          const behind = sleepBehind(a, rtt, late, random);
          expect(behind).toBeGreaterThanOrEqual(interval);
          expect(behind).toBeLessThanOrEqual(MAX_SLEEP_MS);
          const head = sleepAtHead({ ...a, rank: 0 }, rtt, rtt, late);
          expect(head).toBeLessThanOrEqual(MAX_POLL_MS);
          expect(head).toBeGreaterThan(0);
        },
      ),
      { seed: 28, numRuns: 500 },
    );
  });
});

describe("spreadCap: waiters far back wake spread over the cap's upper 40 %, not together", () => {
  it.each([
    { cap: 2000, random: 0, expected: 1200 },
    { cap: 2000, random: 0.5, expected: 1600 },
    { cap: 500, random: 0.25, expected: 350 },
  ])("cap $cap, draw $random → $expected", ({ cap, random, expected }) => {
    expect(spreadCap(cap, random)).toBe(expected);
  });

  it("64 waiters at the cap, on seeded draws: none outside [1200, 2000), at most 12 within any 50 ms", () => {
    const densest = (wakes: number[]) =>
      Math.max(...wakes.map((from) => wakes.filter((at) => at >= from && at < from + 50).length));
    for (const seed of [1, 2, 3]) {
      const random = seededRandom(seed);
      const wakes = Array.from({ length: 64 }, () => sleepBehind(figures({ rank: 100 }), 20, undefined, random()));
      for (const wake of wakes) {
        expect(wake).toBeGreaterThanOrEqual(1200);
        expect(wake).toBeLessThan(2000);
      }
      // 64 over 800 ms: 4 per 50 ms on average.
      expect(densest(wakes)).toBeLessThanOrEqual(12);
    }
    // The check's negative control: one draw for all (one cap) puts all 64 in the same instant.
    expect(densest(Array.from({ length: 64 }, () => sleepBehind(figures({ rank: 100 }), 20, undefined, 0.5)))).toBe(64);
  });
});

describe("placeholderMs: two holds, or four round trips (200 ms at least) before any, doubling, up to the TTL", () => {
  const base = { requestTimeoutMs: 1000, rttMs: 20, holdMs: 40, outOfStep: 0, unreleasedTakes: 0, ttlMs: 2000 };
  it.each([
    { why: "two holds of 40 ms", input: {}, expected: 80 },
    { why: "holds of 10 ms: 50 ms at least", input: { holdMs: 10 }, expected: 50 },
    { why: "out of step twice", input: { outOfStep: 2 }, expected: 320 },
    {
      why: "the line's count of unreleased takes, when larger",
      input: { outOfStep: 1, unreleasedTakes: 3 },
      expected: 640,
    },
    { why: "never past the TTL", input: { outOfStep: 10 }, expected: 2000 },
    { why: "no hold recorded: 200 ms, not a request deadline", input: { holdMs: 0 }, expected: 200 },
    { why: "no hold recorded, 100 ms round trips: four of them", input: { holdMs: 0, rttMs: 100 }, expected: 400 },
    { why: "no hold and no round trip known: a request deadline", input: { holdMs: 0, rttMs: 0 }, expected: 1000 },
    {
      why: "a short request deadline caps the first",
      input: { holdMs: 0, rttMs: 0, requestTimeoutMs: 20 },
      expected: 50,
    },
  ])("$why → $expected", ({ input, expected }) => {
    expect(placeholderMs({ ...base, ...input })).toBe(expected);
  });
});

describe("patience: the sum of the backoff's ceilings between maxAttempts attempts", () => {
  it.each([
    { maxAttempts: 10, base: 100, max: 2000, expected: 11_100 },
    { maxAttempts: 10, base: 100, max: 100, expected: 900 },
    { maxAttempts: 1, base: 100, max: 2000, expected: 0 },
    { maxAttempts: 1000, base: 2 ** 30, max: 2 ** 40, expected: 2_147_483_647 },
  ])("$maxAttempts attempts, base $base, max $max → $expected", ({ maxAttempts, base, max, expected }) => {
    expect(patience(maxAttempts, base, max)).toBe(expected);
  });
});

describe("retryHeld: the other nodes asked again for a few poll intervals, within the validity budget", () => {
  const base = { holdMs: 80, rttMs: 20, ttlMs: 10_000, driftFactor: 0.01, minValidityMs: 1, requestTimeoutMs: 1000 };
  it.each([
    { why: "two round trips and an interval", input: {}, expected: { retryHeldMs: 50, retryHeldEveryMs: 10 } },
    { why: "at most 100 ms", input: { rttMs: 100, holdMs: 800 }, expected: { retryHeldMs: 100, retryHeldEveryMs: 50 } },
    {
      why: "none when the TTL leaves no budget",
      input: { ttlMs: 2000 },
      expected: { retryHeldMs: 0, retryHeldEveryMs: 10 },
    },
    { why: "every 5 ms at least", input: { rttMs: 4 }, expected: { retryHeldMs: 13, retryHeldEveryMs: 5 } },
  ])("$why", ({ input, expected }) => {
    expect(retryHeld({ ...base, ...input })).toEqual(expected);
  });
});

describe("overdue holders", () => {
  it.each([
    { answer: { holdMs: 50, freeInMs: 0 }, expected: true },
    { answer: { holdMs: 50, freeInMs: 10 }, expected: false },
    { answer: { holdMs: 0, freeInMs: 0 }, expected: false },
    { answer: { holdMs: 50, freeInMs: 0, pttlMs: -2 }, expected: false },
  ])("isOverdue($answer) → $expected", ({ answer, expected }) => {
    expect(isOverdue(figures(answer))).toBe(expected);
  });

  it("nextOverdue starts at the first overdue answer, keeps its start within a turn, ends with a new turn or a prediction", () => {
    const overdue = figures({ freeInMs: 0, turns: 7 });
    const started = nextOverdue(overdue, undefined, 1000);
    expect(started).toEqual({ since: 1000, turns: 7 });
    expect(nextOverdue(overdue, started, 1500)).toBe(started);
    expect(nextOverdue(figures({ freeInMs: 0, turns: 8 }), started, 1500)).toEqual({ since: 1500, turns: 8 });
    expect(nextOverdue(figures({ freeInMs: 20 }), started, 1500)).toBeUndefined();
  });
});

describe("when the first in line aims a take", () => {
  it.each([
    { answer: { rank: 0, freeInMs: 30 }, inReach: true },
    { answer: { rank: 1, freeInMs: 30 }, inReach: false },
    { answer: { rank: 0, freeInMs: 0 }, inReach: false },
    { answer: { rank: 0, freeInMs: 2000 }, inReach: true },
    { answer: { rank: 0, freeInMs: 2001 }, inReach: false },
    { answer: { rank: 0, freeInMs: 30, holdMs: 0 }, inReach: false },
    { answer: { rank: 0, freeInMs: 30, pttlMs: -2 }, inReach: false },
  ])("releaseInReach($answer) → $inReach", ({ answer, inReach }) => {
    expect(releaseInReach(figures(answer))).toBe(inReach);
  });

  it.each([
    { answer: { rank: 0, freeInMs: 20 }, imminent: true },
    { answer: { rank: 0, freeInMs: 21 }, imminent: false },
    { answer: { rank: 1, freeInMs: 0 }, imminent: false },
    { answer: { rank: 0, freeInMs: 0, pttlMs: -2 }, imminent: false },
  ])("releaseImminent($answer, rtt 20) → $imminent", ({ answer, imminent }) => {
    expect(releaseImminent(figures(answer), 20)).toBe(imminent);
  });
});

describe("places in line, hand-over offers, round trips", () => {
  it.each([
    { next: 50, timeout: 200, expected: 1050 },
    { next: 50, timeout: 1000, expected: 2050 },
  ])("leaseFor($next, request deadline $timeout) → $expected", ({ next, timeout, expected }) => {
    expect(leaseFor(next, timeout)).toBe(expected);
  });

  it.each([
    { holdMs: 0, expected: 1000 },
    { holdMs: 100, expected: 1000 },
    { holdMs: 400, expected: 1600 },
  ])("hotWindow($holdMs) → $expected", ({ holdMs, expected }) => {
    expect(hotWindow(holdMs)).toBe(expected);
  });

  it.each([
    { why: "no holder in the isolate", held: 0, leaseUntil: 3000, expected: 1000 },
    { why: "the holder's deadline first", held: 500, leaseUntil: 3000, expected: 1500 },
    { why: "a round trip and 5 ms before the place runs out", held: 500, leaseUntil: 1200, expected: 1175 },
    { why: "a place about to run out: now", held: 500, leaseUntil: 1000, expected: 1000 },
  ])("offerWindowEnd, $why → $expected", ({ held, leaseUntil, expected }) => {
    expect(offerWindowEnd(1000, held, leaseUntil, 20)).toBe(expected);
  });

  it.each([
    { average: 0, sample: 40, expected: 40 },
    { average: 40, sample: 80, expected: 50 },
  ])("averageRtt($average, $sample) → $expected", ({ average, sample, expected }) => {
    expect(averageRtt(average, sample)).toBe(expected);
  });

  it.each([
    { why: "the first hold is the average", average: 0, held: 170, expected: 170 },
    { why: "a shorter hold: half way", average: 170, held: 20, expected: 95 },
    { why: "a longer hold: a quarter of the way", average: 20, held: 180, expected: 60 },
    { why: "the same hold: unchanged", average: 60, held: 60, expected: 60 },
  ])("averageHold, $why → $expected", ({ average, held, expected }) => {
    expect(averageHold(average, held)).toBe(expected);
  });
});
