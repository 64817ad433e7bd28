/**
 * The timing arithmetic of waiting: how long to sleep between polls of the gate, where to aim a
 * take, how long a place in line, a placeholder or the patience lasts. Pure functions of their
 * arguments: no clock is read here (callers pass elapsed times) and no random number is drawn
 * (callers pass one in), so that every figure can be checked against a table.
 * @module
 */

import { geometricGap, windowGap } from "../core/backoff.js";
import { driftMs } from "../core/quorum.js";
import type { GateAnswer } from "./gate.js";

/** Shortest margin between a predicted release and the take aimed at it, in ms (timers fire late, by about this much). */
export const MIN_MARGIN_MS = 2;
/** Shortest and longest pause between two polls of the gate, in ms. */
export const MIN_POLL_MS = 5;
export const MAX_POLL_MS = 100;
/**
 * Longest pause between polls when the gate cannot predict the release (no hold recorded yet, or
 * the holder is past the prediction), in ms.
 */
export const MAX_UNPREDICTED_POLL_MS = 100;
/** Shortest first placeholder on a gate out of step before any hold is recorded, in ms. */
export const MIN_UNKNOWN_PLACEHOLDER_MS = 200;
/** Waiters further back than this many turns wake early, as estimates of many turns add up errors. */
export const FAR_BACK = 6;
/** Longest sleep of a waiter far back in line before it polls again, in ms. */
export const MAX_SLEEP_MS = 2000;

/** Most polls a waiter sends per second, and when more than {@link FAR_BACK} turns back. */
export const MAX_POLLS_PER_SECOND = 10;
export const MAX_FAR_BACK_POLLS_PER_SECOND = 2;

/** The least gap between two polls near the front of the line, in ms (see {@link rateGap}). */
export const MIN_POLL_GAP_MS = 50;

/**
 * Polls a waiter in second place or first may send in one turn of the line (between two releases
 * through the gate) before the request budget's spacing paces it again (see `budgetGap`): enough
 * to see the waiter ahead take the lock and to learn when it lets go; behind a long hold, the
 * spacing takes over, and so it does once the budget runs low (see {@link FRONT_POLLS_RESERVE}).
 */
export const FRONT_POLLS_PER_TURN = 3;
/** Polls the budget keeps for its spacing: below this many left, front polls are spaced too. */
export const FRONT_POLLS_RESERVE = 8;

/**
 * Whether a waiter at place `rank` (-1 before its first answer), having sent `frontPolls` polls
 * near the front in this turn of the line and with `pollsLeft` polls in its budget, polls next
 * without the budget's spacing (see {@link FRONT_POLLS_PER_TURN}).
 */
export function unspacedAtFront(rank: number, frontPolls: number, pollsLeft: number): boolean {
  return rank >= 0 && rank <= 1 && frontPolls < FRONT_POLLS_PER_TURN && pollsLeft > FRONT_POLLS_RESERVE;
}

/** What the window of {@link rateGap} keeps to spare, in ms. */
export const POLL_WINDOW_SLACK_MS = 20;

/** What the pacing reads of a gate's answer. */
export type GateFigures = Pick<
  GateAnswer,
  "rank" | "pttlMs" | "freeInMs" | "holdMs" | "holdDeviationMs" | "cycleMs" | "turns"
>;

/** Since when polls have found the current holder past the gate's prediction, and at which turn. */
export interface Overdue {
  readonly since: number;
  readonly turns: number;
}

/**
 * An isolate's average hold of a lock after one more, `heldMs`, as the gate measured it (0 before
 * the first): averaged as the gate averages the line's holds, shorter ones followed faster (a take
 * aimed by a figure too long lands late by the difference; one too short wastes a fan-out).
 */
export function averageHold(averageMs: number, heldMs: number): number {
  if (averageMs === 0) return heldMs;
  return heldMs < averageMs ? Math.floor((averageMs + heldMs) / 2) : Math.floor((3 * averageMs + heldMs) / 4);
}

/** The average poll round trip after one more sample `sampleMs` (0 before the first). */
export function averageRtt(averageMs: number, sampleMs: number): number {
  return averageMs === 0 ? sampleMs : (3 * averageMs + sampleMs) / 4;
}

/**
 * A cap on a sleep, spread over its upper 40 % by `random` in [0, 1). Every waiter far back in a
 * long line reaches the cap: with one cap they all woke together (a trace of the bench's 64 clients
 * at +20 ms: 35–60 polls of the gate within 100–200 ms, every second), and the burst slowed the
 * holder's own requests and the handoff.
 */
export function spreadCap(capMs: number, random: number): number {
  return capMs * (0.6 + 0.4 * random);
}

/** Pause between two polls of the first in line: an eighth of the hold, or a round trip while no hold is known. */
export function pollInterval(holdMs: number, rttMs: number): number {
  const base = holdMs > 0 ? holdMs / 8 : rttMs;
  return Math.min(Math.max(base, MIN_POLL_MS), MAX_POLL_MS);
}

/**
 * How long after the predicted release a take should land: twice the holds' average deviation
 * (landing before the release wastes a fan-out and a round trip), but at most a quarter of a
 * round trip.
 */
export function margin(holdDeviationMs: number, rttMs: number): number {
  return Math.min(Math.max(2 * holdDeviationMs, MIN_MARGIN_MS), rttMs / 4);
}

/**
 * The pace of polls while the release cannot be predicted: in proportion to how long that has
 * lasted (`waitedMs`; arriving at most half that late), from `intervalMs` up to
 * `MAX_UNPREDICTED_POLL_MS`, and never past `expiresInMs` (the lock key's PTTL; -1 when it has
 * none). A short wait is caught within a poll interval, a long one costs 10 polls a second at most.
 * (Thinning polls further as a wait grows, to an eighth of it, cut a 10 s wait from about 70
 * requests to 47, but cost the smaller of two overlapping resource sets half its share in
 * test/unit/waiting/hot-key.test.ts.)
 */
export function patientPace(intervalMs: number, waitedMs: number, expiresInMs: number): number {
  const pace = Math.min(Math.max(intervalMs, waitedMs / 2), MAX_UNPREDICTED_POLL_MS);
  return expiresInMs > 0 ? Math.min(pace, expiresInMs) : pace;
}

/**
 * Whether the holder has kept the lock past the gate's prediction: a hold is recorded, the keys
 * are held, and the gate expected them free by now.
 */
export function isOverdue(answer: GateFigures): boolean {
  return answer.holdMs > 0 && answer.pttlMs !== -2 && answer.freeInMs === 0;
}

/**
 * The overdue record after an answer received at `now`: started when a poll first finds the holder
 * past its prediction, kept while the turn is the same, ended by a new turn or a prediction ahead
 * again. From then on the line polls at a patient pace: at the pace of the usual hold (an eighth of
 * it) 3 waiters behind a 3 s hold in a line of 50 ms holds sent about 250 requests
 * (test/unit/waiting/giving-up.test.ts).
 */
export function nextOverdue(answer: GateFigures, previous: Overdue | undefined, now: number): Overdue | undefined {
  if (!isOverdue(answer)) return undefined;
  return previous?.turns === answer.turns ? previous : { since: now, turns: answer.turns };
}

/**
 * Whether the first in line should aim a take at the release the gate predicts: a hold is
 * recorded, the keys are held, and the release is due within a sleep.
 */
export function releaseInReach(answer: GateFigures): boolean {
  const predicted = answer.holdMs > 0 && answer.pttlMs !== -2;
  return answer.rank === 0 && predicted && answer.freeInMs > 0 && answer.freeInMs <= MAX_SLEEP_MS;
}

/**
 * A node's round trip from this isolate after one more sample `sampleMs` (0 before the first): a
 * shorter sample is followed halfway at once, a longer one by an eighth, so that the figure stays
 * near the node's distance rather than the load of the moment (a busy event loop delays every
 * answer, now and then by many ms, and a figure that followed it would hold a release back, or
 * spread a take, for nothing).
 */
export function distanceRtt(averageMs: number, sampleMs: number): number {
  if (averageMs === 0) return sampleMs;
  return sampleMs < averageMs ? (averageMs + sampleMs) / 2 : (7 * averageMs + sampleMs) / 8;
}

/** Differences of one-way times under this are noise (timers, load): every node is sent to at once. */
export const MIN_SHIFT_MS = 4;

/**
 * How long a release holds back its part for the gate, in ms: when the gate is nearer than a
 * quorum of the nodes, until the release could have reached that quorum (the quorum-th shortest
 * of our one-way times, each half a round trip). The gate then frees the lock no sooner than a
 * quorum of nodes is free, so that a take aimed at the gate's release, landing on every node when
 * it lands on the gate (see {@link takeDelays}), finds a quorum free: aimed at a gate next to the
 * holder, a take that landed on every node at once found the far ones still held, and waited for
 * the answers to asking them again. 0 while a round trip is unknown or the difference is noise; at
 * most `maxMs`.
 */
export function gateReleaseDelay(
  rtts: readonly number[],
  nodes: number,
  gate: number,
  quorum: number,
  maxMs: number,
): number {
  const oneWay = knownOneWay(rtts, nodes);
  if (oneWay === undefined) return 0;
  const delay = quorumOneWay(oneWay, quorum) - (oneWay[gate] as number);
  return delay < MIN_SHIFT_MS ? 0 : Math.min(delay, maxMs);
}

/**
 * When a take aimed at the gate's release sends each node its request, in ms after the take
 * starts: so that it lands on every node at once, when it lands on the gate (the farthest node
 * first); the gate's own entry is how long before the aim the take starts.
 * `undefined` while a round trip is unknown, or when the nodes stand alike (every node at once).
 */
export function takeDelays(rtts: readonly number[], nodes: number): number[] | undefined {
  const oneWay = knownOneWay(rtts, nodes);
  if (oneWay === undefined) return undefined;
  const farthest = Math.max(...oneWay);
  if (farthest - Math.min(...oneWay) < MIN_SHIFT_MS) return undefined;
  return oneWay.map((d) => farthest - d);
}

/**
 * Whether the gate is much nearer than a quorum of the nodes (the quorum-th shortest one-way time
 * more than twice the gate's, and the difference no noise): a take that landed on the gate before
 * the release then asks the gate again in the same attempt, and the nodes that said "held" too,
 * rather than wait for the far nodes' answers to decide the attempt before a new one (a round trip
 * to the quorum-th node, where the gate's is a fraction of it). Where the nodes stand alike, the
 * attempt is decided about when the gate answers, and a new take costs no more.
 */
export function gateNearerThanQuorum(rtts: readonly number[], nodes: number, gate: number, quorum: number): boolean {
  const oneWay = knownOneWay(rtts, nodes);
  if (oneWay === undefined) return false;
  return quorumOneWay(oneWay, quorum) > 2 * (oneWay[gate] as number) + MIN_SHIFT_MS;
}

/**
 * Our round trip to the quorum-th nearest node, in ms: the least a turn takes a holder near us (its
 * take must reach a quorum); `undefined` while a round trip is unknown.
 */
export function quorumRtt(rtts: readonly number[], nodes: number, quorum: number): number | undefined {
  const oneWay = knownOneWay(rtts, nodes);
  return oneWay === undefined ? undefined : 2 * quorumOneWay(oneWay, quorum);
}

/** The quorum-th shortest of `oneWay`: when a request sent to every node has reached a quorum. */
function quorumOneWay(oneWay: readonly number[], quorum: number): number {
  return [...oneWay].sort((a, b) => a - b)[quorum - 1] as number;
}

/** Half of each of `nodes` round trips, or `undefined` while one is unknown. */
function knownOneWay(rtts: readonly number[], nodes: number): number[] | undefined {
  const oneWay: number[] = [];
  for (let i = 0; i < nodes; i++) {
    const rtt = rtts[i];
    if (rtt === undefined || !(rtt > 0)) return undefined;
    oneWay.push(rtt / 2);
  }
  return oneWay;
}

/** Whether a take that came early should be sent once more at once: first in line, the release due within a round trip. */
export function releaseImminent(answer: GateFigures, rttMs: number): boolean {
  return answer.rank === 0 && answer.pttlMs !== -2 && answer.freeInMs <= rttMs;
}

/**
 * How long the first in line sleeps before its next poll. `firstForMs`: how long polls have found
 * it first in line; `overdueForMs`: how long the holder has been past its prediction, if it is.
 *
 * With no release to aim at within reach (no hold recorded, a hold that cannot be predicted, or one
 * predicted further off than a sleep) the holder may let go any moment before its key expires: a
 * patient pace (the bench's acquire behind a 300 ms hold: 14–15 subrequests in all; at a poll
 * interval, the first in line behind a holder that died with a 10 s key sent 182 requests).
 */
export function sleepAtHead(
  answer: GateFigures,
  rttMs: number,
  firstForMs: number,
  overdueForMs: number | undefined,
): number {
  const interval = pollInterval(answer.holdMs, rttMs);
  if (overdueForMs !== undefined) return patientPace(interval, overdueForMs, answer.pttlMs);
  if (answer.freeInMs <= interval) return interval;
  return patientPace(interval, firstForMs, answer.freeInMs);
}

/**
 * How long a waiter behind the first in line sleeps before its next poll, measured from the
 * answer's arrival (the next poll lands a round trip after it is sent). `random` in [0, 1) spreads
 * the cap (see {@link spreadCap}); `overdueForMs` as in {@link sleepAtHead}.
 *
 * No hold recorded yet: a turn lasts at least its holder's round trip to a quorum, so each waiter
 * ahead takes at least that long; half our own (`quorumRttMs`, the gate's round trip while it is
 * unknown) per place leaves room for holders nearer the nodes (a line of 64 polling every 100 ms
 * sent 600 polls a second and slowed the handoffs it waited for), kept under 500 ms so that a guess
 * too long costs a late turn only. The quorum's round trip, not the gate's: beside a gate whose
 * quorum is far, the gate answers in a few ms while each turn lasts a quarter second, and polls
 * paced by the gate spend the request budget before the waiter's own turn.
 *
 * A hold recorded: wake once the waiter ahead should have taken the lock, a third of the way into
 * the window from that take to a round trip before its release. A turn is the line's measured pace,
 * at most a hold plus the margin and a quarter round trip (capped at a hold plus the margin alone,
 * it was short on real timers and waiters several turns back polled twice). Far back, the errors of
 * many turns add up: wake a turn early and a little more; while holds vary a lot, sooner still.
 * Behind an overdue holder, no sooner than the first in line would see it let go.
 */
export function sleepBehind(
  answer: GateFigures,
  rttMs: number,
  overdueForMs: number | undefined,
  random: number,
  quorumRttMs: number = rttMs,
): number {
  const interval = pollInterval(answer.holdMs, rttMs);
  if (answer.holdMs === 0) {
    return Math.min(Math.max((answer.rank * quorumRttMs) / 2, interval), spreadCap(MAX_SLEEP_MS / 4, random));
  }
  const m = margin(answer.holdDeviationMs, rttMs);
  const turnMs = answer.cycleMs > 0 ? Math.min(answer.cycleMs, answer.holdMs + m + rttMs / 4) : answer.holdMs + m;
  const settle = m + Math.max(MIN_POLL_MS, (answer.holdMs - rttMs - m) / 3);
  const ahead = answer.rank - 1;
  const early = ahead > FAR_BACK ? turnMs * (1 + ahead / 32) : 0;
  const spread = answer.holdDeviationMs / answer.holdMs;
  const certainty = spread > 0.2 ? Math.max(0.5, 1.2 - spread) : 1;
  const wake = (answer.freeInMs + ahead * turnMs - early) * certainty + settle - rttMs;
  const paced = overdueForMs === undefined ? wake : Math.max(wake, patientPace(interval, overdueForMs, answer.pttlMs));
  return Math.min(Math.max(paced, interval), spreadCap(MAX_SLEEP_MS, random));
}

/**
 * How long from `now` until a waiter at place `rank` (-1 before its first answer) may poll again,
 * given when it sent its latest polls (`recentPolls`, oldest first). Near the front: at least
 * {@link MIN_POLL_GAP_MS} after the last poll, and no window of a second holds more than
 * {@link MAX_POLLS_PER_SECOND} (with {@link POLL_WINDOW_SLACK_MS} to spare, so that an observer whose
 * clock reads a poll a little late or early never counts one more). A window and a half-length gap,
 * not a gap of 100 ms: a waiter whose poll came a little early to find the waiter ahead of it taken
 * (a turn lasts a hold and a round trip, often well under 100 ms) looks again soon, where a 100 ms
 * gap made it late for its own turn. More than {@link FAR_BACK} turns back, where no turn is near, a
 * least gap of a second over {@link MAX_FAR_BACK_POLLS_PER_SECOND}.
 */
export function rateGap(recentPolls: readonly number[], now: number, rank: number): number {
  const last = recentPolls[recentPolls.length - 1];
  if (last === undefined) return 0;
  const least = rank > FAR_BACK ? 1000 / MAX_FAR_BACK_POLLS_PER_SECOND : MIN_POLL_GAP_MS;
  const window = windowGap(recentPolls, now - POLL_WINDOW_SLACK_MS, MAX_POLLS_PER_SECOND);
  return Math.max(last + least - now, window, 0);
}

/**
 * The least gap from a waiter's last poll to its next, in ms: the request budget's spacing (see
 * `core/backoff.geometricGap`, from 100 ms waited), at least {@link MIN_POLL_MS}. (An aimed take is
 * an attempt, a fan-out to every node, paced by its prediction and counted in the budget, not a
 * poll.)
 */
export function budgetGap(waitedMs: number, waitLeftMs: number, pollsLeft: number): number {
  return Math.max(MIN_POLL_MS, geometricGap(waitedMs, waitLeftMs, pollsLeft, 1000 / MAX_POLLS_PER_SECOND));
}

/**
 * How far ahead the request budget's spacing plans a waiter's polls once the line's pace is known
 * (a hold recorded), in ms: four times the rest of the wait as that pace predicts it, `rank + 1`
 * turns, a turn being the line's measured interval between releases (`cycleMs`), or a hold and two
 * round trips to a quorum (`rttMs`) when that is longer; and four times as long as the holder has
 * been past its prediction (`overdueForMs`), so that behind a holder that keeps the lock the
 * spacing stretches towards the patience. `Infinity` while no hold is recorded. (Planned over the
 * patience, which starts again every time the line moves, polls near the front were a second apart
 * late in a long wait: a waiter came for its turn long after it, and the gate gave the lock to
 * whoever polled first, a round trip or two after each release.)
 */
export function spacingHorizon(rank: number, holdMs: number, cycleMs: number, rttMs: number, overdueForMs = 0): number {
  if (rank < 0 || !(holdMs > 0)) return Number.POSITIVE_INFINITY;
  return SPACING_TURNS * ((rank + 1) * Math.max(cycleMs, holdMs + 2 * rttMs) + overdueForMs);
}

/** Turns per place ahead in the horizon of {@link spacingHorizon}. */
export const SPACING_TURNS = 4;

/** A waiter's place in line lasts until its next poll is overdue by this margin. */
export function leaseFor(nextPollMs: number, requestTimeoutMs: number): number {
  return nextPollMs + Math.max(2 * requestTimeoutMs, 1000);
}

/** How long a resource stays hot in the isolate after a poll: four holds, a second at least. */
export function hotWindow(holdMs: number): number {
  return Math.max(1000, 4 * holdMs);
}

/**
 * How long the other nodes are asked again after "held" while the gate is ours (the previous
 * holder's release is on its way to them, reaching the nodes within about a round trip of each
 * other), and how often: a few poll intervals, and never so long that the validity left could fall
 * under `minValidityMs`.
 */
export function retryHeld(input: {
  holdMs: number;
  rttMs: number;
  ttlMs: number;
  driftFactor: number;
  minValidityMs: number;
  requestTimeoutMs: number;
}): { retryHeldMs: number; retryHeldEveryMs: number } {
  const { rttMs, ttlMs } = input;
  const every = Math.max(MIN_POLL_MS, Math.min(rttMs / 2, pollInterval(input.holdMs, rttMs)));
  const budget = ttlMs - driftMs(ttlMs, input.driftFactor) - input.minValidityMs - 2 * input.requestTimeoutMs;
  return { retryHeldMs: Math.max(0, Math.min(budget, 2 * rttMs + every, 100)), retryHeldEveryMs: every };
}

/**
 * How long a placeholder left on the gate lasts. The first lasts two of the holds the gate has
 * seen (a holder that won without the gate lets go within about a hold); before any hold is
 * recorded, four of our round trips, at least `MIN_UNKNOWN_PLACEHOLDER_MS` (a request deadline
 * stood the line still for most of a second after the holder had let go). Each time a gate out of
 * step shows itself again (`outOfStep` by this waiter, `unreleasedTakes` as the gate counts them
 * for the whole line) it doubles, up to the TTL: a long hold costs a few fan-outs.
 */
export function placeholderMs(input: {
  requestTimeoutMs: number;
  rttMs: number;
  holdMs: number;
  outOfStep: number;
  unreleasedTakes: number;
  ttlMs: number;
}): number {
  const { rttMs, holdMs } = input;
  const longest = Math.max(50, input.requestTimeoutMs);
  const unknownHold = rttMs > 0 ? Math.max(MIN_UNKNOWN_PLACEHOLDER_MS, 4 * rttMs) : longest;
  const first = Math.min(holdMs > 0 ? Math.max(50, 2 * holdMs) : unknownHold, longest);
  return Math.min(first * 2 ** Math.max(input.outOfStep, input.unreleasedTakes), input.ttlMs);
}

/**
 * Until when the first in line may wait for a holder of its isolate to hand the lock over without
 * polling: by the holder's deadline (`heldForMs` from `now`), and a round trip before its place in
 * line runs out at `leaseUntil` (a waiter whose place ran out is no longer first there, and the
 * gate would refuse the hand-over that the other nodes carry out). `now` when no holder of the
 * isolate has the lock.
 */
export function offerWindowEnd(now: number, heldForMs: number, leaseUntil: number, rttMs: number): number {
  if (heldForMs <= 0) return now;
  return Math.max(now, Math.min(now + heldForMs, leaseUntil - rttMs - MIN_POLL_MS));
}
