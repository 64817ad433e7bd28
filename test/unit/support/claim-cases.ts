/**
 * Scenarios of the claim model (see `claim-model.ts`), shrunk by fast-check from runs that found
 * a violation: the property test runs each of them every time. Each comment says how the keys
 * came to be below a claim, or two claims to overlap. "Passed on": the lock handed to the next
 * waiter of the isolate with the releasing holder's own token, which is what the first five need;
 * the last three need no hand-on at all.
 */
import type { Holder, Scenario } from "./claim-model.js";

/** Three nodes, no delay at all unless a case says otherwise. */
const base = {
  nodeCount: 3,
  seed: 0,
  requestTimeoutMs: 100,
  delay: { baseMs: 0, spreadMs: 0, lateShare: 0, lateMs: 50, dropShare: 0 },
} as const;

/** A holder of client 0 (the isolate shared with client 1) on "r", from the start. */
function holder(overrides: Partial<Holder>): Holder {
  return {
    kind: "holder",
    client: 0,
    atMs: 0,
    resources: ["r"],
    ttlMs: 400,
    how: "acquire",
    extensions: [],
    holdMs: 0,
    release: { times: 0, together: false, gapMs: 0 },
    ...overrides,
  };
}

const releases = (times: 1 | 2 | 3) => ({ times, together: false, gapMs: 0 });
const extension = (afterMs: number, ttlMs: number) => ({ afterMs, ttlMs, inFlight: false });

export interface KnownCase {
  readonly name: string;
  readonly scenario: Scenario;
  /** Grants that take the lock over from an earlier one, at least (with or without pass-on). */
  readonly handOvers: number;
}

export const knownCases: readonly KnownCase[] = [
  {
    // The second and third calls deleted the keys of the holders the first calls passed the lock
    // on to: "overlap: #1 and #2 both claim".
    name: "release() three times while two callers of the isolate wait",
    handOvers: 1,
    scenario: { ...base, actors: [holder({ ttlMs: 1000, release: releases(3) }), holder({}), holder({})] },
  },
  {
    // using()'s finally released once more, and deleted the next holder's keys: "backing".
    name: "lock.release() inside using() while callers of the isolate wait",
    handOvers: 1,
    scenario: {
      ...base,
      // It holds 150 ms before its releases: waiters poll at most 10 times a second, and the
      // next one must have learned that it is first in line for the release to hand it over.
      actors: [
        holder({ ttlMs: 1000 }),
        holder({ atMs: 1 }),
        holder({ how: "using", release: releases(1), holdMs: 150 }),
      ],
    },
  },
  {
    // Client 1 released by token with the token of the lock passed on: "backing".
    name: "release by token from another client, with the token of a lock released (and passed on)",
    handOvers: 1,
    scenario: {
      ...base,
      actors: [
        holder({ ttlMs: 1000 }),
        holder({ atMs: 1 }),
        { kind: "by-token", client: 0, op: "release", nth: 0, delayMs: 0, ttlMs: 50 },
        holder({ release: releases(1), holdMs: 150 }),
      ],
    },
  },
  {
    // The releasing holder's 100 ms extension landed after its lock was passed on, and shortened
    // the next holder's keys below its claim: "backing".
    name: "a shorter extension in flight at release",
    handOvers: 1,
    scenario: {
      ...base,
      delay: { ...base.delay, spreadMs: 4 },
      actors: [
        holder({ ttlMs: 1000, release: releases(1) }),
        holder({ extensions: [{ afterMs: 0, ttlMs: 467, inFlight: true }], holdMs: 101, release: releases(1) }),
        holder({ extensions: [{ afterMs: 0, ttlMs: 100, inFlight: true }], holdMs: 4, release: releases(1) }),
      ],
    },
  },
  {
    // The pass-on's compare-and-PEXPIRE (for the next holder's 400 ms TTL) landed after the next
    // holder's own longer extension, and set a key back below its claim: "backing".
    name: "the next holder extends longer while the pass-on's requests are on their way",
    handOvers: 1,
    scenario: {
      ...base,
      seed: 856570424,
      delay: { ...base.delay, lateShare: 0.15 },
      actors: [
        holder({
          ttlMs: 1000,
          extensions: [{ afterMs: 19, ttlMs: 100, inFlight: true }],
          holdMs: 7,
          release: releases(1),
        }),
        holder({ extensions: [{ afterMs: 0, ttlMs: 423, inFlight: true }] }),
      ],
    },
  },
  {
    // Two extensions of one lock at once: the later (100 ms) settled first and set the keys'
    // TTL last; the earlier one's answers came back after it and raised the claim above the keys
    // (by 1 ms): "backing". A claim must not be raised by answers older than its last change.
    name: "two extensions of one lock in flight, the earlier one answered last",
    handOvers: 0,
    scenario: {
      ...base,
      delay: { ...base.delay, lateShare: 0.15 },
      actors: [
        holder({ ttlMs: 1000 }),
        holder({}),
        holder({ atMs: 172 }),
        holder({
          atMs: 386,
          extensions: [
            { afterMs: 0, ttlMs: 106, inFlight: true },
            { afterMs: 0, ttlMs: 100, inFlight: false },
          ],
        }),
      ],
    },
  },
  {
    // Extensions one after the other, each awaited: the first settled at a quorum while its
    // request to one node was still on its way; it landed after the second extension had set
    // the keys, and set that node's key back below the second one's claim (by 1 to 6 ms):
    // "backing".
    name: "an extension's late request lands after the next extension of the same lock",
    handOvers: 0,
    scenario: {
      ...base,
      seed: -2138963923,
      delay: { ...base.delay, lateShare: 0.05 },
      actors: [
        holder({ ttlMs: 1000, release: releases(1) }),
        holder({ resources: ["s"], extensions: [extension(0, 100), extension(0, 100)] }),
        holder({ atMs: 4, extensions: [extension(207, 177), extension(171, 100)], holdMs: 36, release: releases(1) }),
        holder({ atMs: 398, extensions: [extension(0, 100), extension(0, 107)] }),
      ],
    },
  },
  {
    // A waiter took the gate out of step (free with no release through it) and, the holder still
    // there, asked the gate to shorten its key to a placeholder. That request timed out; the take
    // fanned out with the same token and was granted by the gate's key at the TTL, with the
    // answers of two other nodes; the late request then cut the gate's key to the placeholder
    // under the claim: "backing". No releases at all.
    name: "a take's request to shorten its key on the gate lands after the take was granted",
    handOvers: 0,
    scenario: {
      ...base,
      nodeCount: 5,
      seed: 1680100281,
      delay: { ...base.delay, lateShare: 0.15, lateMs: 249 },
      actors: [
        holder({ ttlMs: 1000 }),
        holder({ atMs: 46 }),
        holder({ atMs: 241, resources: ["r", "s"] }),
        holder({ atMs: 241 }),
      ],
    },
  },
];
