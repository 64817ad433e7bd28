/**
 * How `acquire()` waits for a lock that is held elsewhere.
 *
 * The first attempt is a plain fan-out to every node: uncontended, a lock costs one round trip.
 * When the lock turns out to be held, the client does not fan out again and again. It waits in
 * line at the resource's gate node (see `scripts/gate.ts`), polling it with one request:
 * - the gate keeps a queue of waiters, so they take turns (no starvation, and a client that just
 *   released goes to the back of the line when it comes again);
 * - only the first in line tries to take the lock, so waiters that start together never split the
 *   votes among themselves;
 * - the gate records how long holds last, so the first in line aims a fan-out to every node to
 *   land just after the predicted release (its take of the gate node rides in the same round
 *   trip); the others sleep until the waiter ahead of them should have taken the lock;
 * - a poll that finds the lock free takes the gate node at once, and the other nodes follow;
 * - when the holder is in the same isolate, its release hands the lock over to the first in line
 *   (see `isolate/handoff.ts`): no take of its own, a round trip sooner.
 *
 * Safety never depends on the gate: every grant is a quorum of `SET NX` (or of keys a release set
 * for us in the same step as it deleted its own) with enough validity, counted from before the
 * first request that could have set a key. When the gate is down or slow, waiting falls back to
 * fan-outs with full-jitter backoff, and a gate that forgot the lock (a restart) gets a
 * placeholder key, so that the waiters keep polling one node.
 *
 * Where to read on: `phases.ts` (the waiter's phases and transitions), `waiter.ts` (the driver),
 * `in-line.ts` (polling and taking turns), `offers.ts` (hand-overs), `gate-client.ts` (requests to
 * the gate), `probes.ts` (one-request questions to the other nodes), `retry.ts` (backoff),
 * `limits.ts` (giving up), `pacing.ts` (the timing arithmetic, pure), `state.ts` (what a waiter
 * remembers).
 * @module
 */
import type { WaitingStrategy } from "../core/waiting.js";
import { hotResourcesFor } from "../isolate/hot-resources.js";
import { releaseInLine } from "./release.js";
import { Waiter } from "./state.js";
import { runWaiter } from "./waiter.js";

/**
 * Waiting in line at the resource's gate node (see the module's documentation): the default
 * waiting strategy of `edge-redlock`.
 */
export const waitInLine: WaitingStrategy = {
  forClient(engine, nodeIdentities) {
    const hot = hotResourcesFor(engine.clock, nodeIdentities);
    return {
      acquire: (request, maxAttempts, signal, operations) =>
        runWaiter(new Waiter(engine, hot, request, maxAttempts, signal, operations)),
      release: (release) => releaseInLine(engine, hot, release),
    };
  },
};
