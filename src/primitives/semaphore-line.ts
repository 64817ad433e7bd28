/**
 * The line of a semaphore's waiters: first come, first served, across isolates.
 *
 * One node, the semaphore's gate (picked by a hash of its line key, so the same for every client
 * of the same nodes), keeps a line of waiters in a sorted set by arrival, and their leases by the
 * node's own clock (see `scripts/semaphore-line.ts`). A waiter polls it with one request, which
 * keeps its place, answers its rank, and says which slots look free on that node. Only a waiter
 * whose rank is below the number of free slots fans out, for the free slot at its rank: waiters
 * at ranks 0 and 1 with two slots free try different slots, so they do not split one slot's
 * votes, and a waiter behind them tries none. It leaves the line when granted or when it gives
 * up; a waiter that dies stops polling, and its entry drops out when its lease runs out.
 *
 * Safety never depends on the line: each slot is still a Redlock mutex, granted by a quorum of
 * `SET NX` with validity left. The line only orders who tries. A gate that does not answer ends
 * waiting in line for the call (the semaphore falls back to probing with backoff). A gate whose
 * view of a slot is stale (it lost the key, or missed the holder's `SET`) costs one refused
 * fan-out, after which the waiter skips that slot for a while ({@link suspectMs}).
 * @module
 */
import type { AttemptReport } from "../base/report.js";
import { sleep } from "../base/signals.js";
import { geometricGap, patience, windowGap } from "../core/backoff.js";
import { acquireTimeout, checkBudget, stopAfter } from "../core/backoff-waiting.js";
import type { Engine } from "../core/engine.js";
import type { RequestMeter, TaskContext } from "../core/fanout.js";
import { keysHash } from "../core/keys.js";
import type { Lock } from "../core/lock.js";
import { unexpected } from "../core/node-operations.js";
import { abortedError } from "../core/operations/acquire.js";
import { type AcquireRequest, MAX_DELAY_MS, type ResolvedOptions } from "../core/options.js";
import { refusalReason } from "../core/quorum.js";
import { runScript } from "../core/scripts/script.js";
import { randomToken } from "../core/token.js";
import type { RedisNode } from "../transport/rest.js";
import { primitiveKey } from "./calls.js";
import { semaphoreLineScript } from "./scripts/semaphore-line.js";

/** At most this many polls of the line a second per waiter: no window of a second holds more. */
export const MAX_POLLS_PER_SECOND = 10;
/** Shortest pause between two polls of a waiter {@link FAR_BACK} turns or more behind its own. */
export const FAR_BACK_POLL_GAP_MS = 500;
/** The pause before the next poll when the gate cannot tell when a slot frees up (no hold seen end yet), in ms. */
export const UNPREDICTED_POLL_MS = 100;
/** The longest pause a prediction asks for, in ms: a lease given with a poll covers it (see {@link leaseFor}). */
export const MAX_AIMED_PAUSE_MS = 1000;
/** How long after the predicted release a poll aims to land at the gate, in ms. */
export const AIM_MARGIN_MS = 5;
/**
 * Waiters this many turns behind their own poll at most twice a second: a turn frees every slot
 * once, so a waiter with `behind` more ahead of it than slots are free is `behind / k` turns back.
 */
export const FAR_BACK = 6;

/**
 * The first in line probes another node once in this many polls that found no slot free on the
 * gate (see `waitInLine`).
 */
export const PROBE_EVERY = 4;

/** How long a line stays hot in an isolate after a poll that found others waiting or nothing free for us, in ms. */
export const HOT_MS = 2000;

/**
 * The lines this isolate saw busy lately, by cluster (see `Engine.scoped`: every client of the same
 * nodes, such as one made per request on Workers, shares the entry) and line key → until when (the
 * options' clock).
 */
const hotLines = new Map<string, number>();

/**
 * Whether this isolate saw the line busy lately: its next caller then joins the line at once
 * instead of trying a slot first, so that a client that releases a permit and takes another
 * right away goes to the back of the line, as does anyone else who arrives while waiters wait.
 */
export function isHot(engine: Engine, lineKey: string, now: number): boolean {
  const [line] = engine.scoped([lineKey]) as [string];
  const until = hotLines.get(line);
  if (until === undefined) return false;
  if (until > now) return true;
  hotLines.delete(line);
  return false;
}

function markHot(engine: Engine, lineKey: string, until: number): void {
  // Bounded: the lines of names no longer in use drop out when it grows.
  if (hotLines.size >= 1024) for (const [key, at] of hotLines) if (at <= until - HOT_MS) hotLines.delete(key);
  hotLines.set(engine.scoped([lineKey])[0] as string, until);
}

/** What one poll of the line said. */
export interface LineAnswer {
  /** Our place in line, 0 first. */
  readonly rank: number;
  /** How many wait, us included. */
  readonly length: number;
  /** Per slot, whether its key exists on the gate node. */
  readonly held: readonly boolean[];
  /**
   * Per slot, in ms from the gate's answer, when its holder should let go by the holds the gate has
   * seen end (0 free or overdue, -1 unknown: no hold seen end yet).
   */
  readonly dueMs: readonly number[];
}

/** The keys of a semaphore's line on its gate node: the line by arrival, the leases, and the holds seen. */
export function lineKeys(keyPrefix: string, name: string): LineKeys {
  return [
    primitiveKey(keyPrefix, "semaphore", name, "line"),
    primitiveKey(keyPrefix, "semaphore", name, "leases"),
    primitiveKey(keyPrefix, "semaphore", name, "holds"),
  ];
}

/** See {@link lineKeys}. */
export type LineKeys = readonly [line: string, leases: string, holds: string];

/** The gate of a line: a node picked by a hash of the line key, the same for every client. */
export function lineGate(lineKey: string, nodeCount: number): number {
  return keysHash([lineKey]) % nodeCount;
}

/** One poll (`leave`: leaving) of the line on its gate node. */
export async function lineOnNode(
  node: RedisNode,
  slotKeys: readonly string[],
  keys: LineKeys,
  waiter: string,
  mode: "poll" | "leave",
  leaseMs: number,
  context: TaskContext,
): Promise<LineAnswer> {
  const reply = await runScript(
    node,
    semaphoreLineScript,
    [...slotKeys, ...keys],
    [waiter, mode, Math.ceil(leaseMs), slotKeys.length],
    context,
  );
  if (Array.isArray(reply) && reply.length === 4) {
    const [rank, length, slots, due] = reply;
    const count = mode === "leave" ? 0 : slotKeys.length;
    const dueMs = typeof due === "string" && due !== "" ? due.split(",").map(Number) : [];
    const shapeOk =
      typeof slots === "string" && slots.length === count && /^[hf]*$/.test(slots) && dueMs.length === count;
    if (Number.isInteger(rank) && Number.isInteger(length) && shapeOk && dueMs.every((ms) => ms >= -1)) {
      return {
        rank: rank as number,
        length: length as number,
        held: [...slots].map((letter) => letter === "h"),
        dueMs,
      };
    }
  }
  throw unexpected(node, semaphoreLineScript.name, reply);
}

/**
 * The free slot a waiter at `rank` tries, by the gate's view `held`, skipping those `skip` names
 * (its own permits, suspects): the free slot at its rank, or `undefined` when more waiters are
 * ahead of it than there are free slots.
 */
export function slotByRank(
  rank: number,
  held: readonly boolean[],
  skip: (slot: number) => boolean,
): number | undefined {
  const free: number[] = [];
  held.forEach((isHeld, slot) => {
    if (!isHeld && !skip(slot)) free.push(slot);
  });
  return rank >= 0 && rank < free.length ? free[rank] : undefined;
}

/**
 * The least pause before the next poll, in ms: {@link FAR_BACK_POLL_GAP_MS} when `turnsBack` (how many
 * more wait ahead of us than slots are free, over the number of slots) is {@link FAR_BACK} or more,
 * and wider as the wait grows
 * when the request budget would not last (`core/backoff.geometricGap`, from 100 ms waited): a
 * waiter behind long holds runs out of patience, not of requests. The rate of polls near the front
 * is bounded by a window instead (at most {@link MAX_POLLS_PER_SECOND} in any second).
 */
export function pollGap(turnsBack: number, waitedMs: number, waitLeftMs: number, pollsLeft: number): number {
  const least = turnsBack >= FAR_BACK ? FAR_BACK_POLL_GAP_MS : 0;
  const spread = geometricGap(waitedMs, waitLeftMs, pollsLeft, 1000 / MAX_POLLS_PER_SECOND);
  return Math.min(Math.max(least, spread), MAX_DELAY_MS);
}

/**
 * The pause the line's prediction asks for before the next poll, in ms from the answer's arrival:
 * so that the poll lands at the gate just after the slot our turn waits for should free up (the
 * `behind + 1`-th soonest of the holders' due times; the answer left the gate half a round trip
 * before it arrived, and the poll takes another half), capped at {@link MAX_AIMED_PAUSE_MS}. When the
 * gate cannot tell (no hold seen end yet), or the holder is overdue, {@link UNPREDICTED_POLL_MS}, at
 * a patient pace: a waiter that looks too often only meets the window of 10 polls a second.
 * `due`: the due times of the held slots we may get (not our own), in ms.
 */
export function aimedPause(due: readonly number[], behind: number, rttMs: number): number {
  const sorted = [...due].sort((a, b) => a - b);
  const turn = sorted[behind];
  if (turn === undefined || sorted.slice(0, behind + 1).some((ms) => ms < 0)) return UNPREDICTED_POLL_MS;
  if (turn === 0) return UNPREDICTED_POLL_MS;
  return Math.min(Math.max(0, turn + AIM_MARGIN_MS - rttMs), MAX_AIMED_PAUSE_MS);
}

/**
 * A place in line lasts until the next poll is overdue by this margin: three request deadlines (a
 * poll, then a probe or a fan-out, then the next poll), a second at least.
 */
export function leaseFor(gapMs: number, requestTimeoutMs: number): number {
  return gapMs + Math.max(3 * requestTimeoutMs, 1000);
}

/**
 * How long a slot the gate showed free, but a fan-out found held, is skipped: the call's TTL, at
 * most 2 s (a stale gate shows a held slot free until its holder lets go; two waiters that split
 * a slot's votes leave it free, and must not skip it for long).
 */
export function suspectMs(ttlMs: number): number {
  return Math.min(ttlMs, 2000);
}

/** What waiting in line needs of the semaphore and its call. */
export interface Seat {
  readonly engine: Engine;
  readonly o: ResolvedOptions;
  readonly signal: AbortSignal | undefined;
  readonly meter: RequestMeter;
  /** The call's request for every slot (its keys: the slot keys, in slot order). */
  readonly request: AcquireRequest;
  readonly reports: AttemptReport[];
  /** When the call times out (`acquireTimeoutMs`), on the options' clock. */
  readonly deadline: number;
  /** Whether this instance holds `slot` already: it never tries that one. */
  readonly own: (slot: number) => boolean;
  /** One fan-out for `slot` (its report pushed onto `reports`): the lock, or the report of its refusal. */
  readonly trySlot: (slot: number) => Promise<{ lock: Lock } | { lock?: undefined; report: AttemptReport }>;
  /** Which slots the next node in turn other than `gate` holds (one request); `undefined` when it did not answer. */
  readonly probe: (gate: number) => Promise<boolean[] | undefined>;
  /** The error of giving up: every permit held, or the last attempt's failure. */
  readonly failure: () => Error;
}

/**
 * Wait in line for a slot: the permit, or `gate-down` when the gate did not answer a poll (the
 * caller falls back to probing with backoff). Throws as the semaphore's waiting does: the failure
 * when the attempts or the patience run out, `AcquireTimeoutError`, `AbortedError`,
 * `RequestBudgetError`. Every way out but `gate-down` leaves the line first.
 */
export async function waitInLine(seat: Seat): Promise<Lock | "gate-down"> {
  const { engine, o, request, reports } = seat;
  const nodeCount = engine.nodes.length;
  const keys = lineKeys(o.keyPrefix, request.resources[0] as string);
  const gate = lineGate(keys[0], nodeCount);
  const waiter = randomToken();
  const started = o.clock.now();
  const patient = o.maxAttempts !== Number.POSITIVE_INFINITY;
  const patienceMs = patience(o.maxAttempts, o.retryBaseDelayMs, o.retryMaxDelayMs);
  let patienceUntil = started + patienceMs;
  let bestRank = Number.POSITIVE_INFINITY;
  let inLine = false;
  let headPolls = 0;
  let behind = 0;
  let turnsBack = 0;
  let rttMs = 0;
  const recentPolls: number[] = [];
  const suspects = new Map<number, number>();
  // After a poll: a take (N) and leaving (1), with the release (N) that checkBudget keeps.
  const reserve = nodeCount + 1;
  const out = () => {
    if (inLine) leaveLine(seat, gate, keys, waiter);
    inLine = false;
  };
  for (;;) {
    if (seat.signal?.aborted) {
      out();
      throw abortedError(request.resources, reports, seat.signal.reason);
    }
    const now = o.clock.now();
    const budget = o.requestBudget;
    const pollsLeft = budget === Number.POSITIVE_INFINITY ? budget : budget - seat.meter.sent - reserve - nodeCount;
    if (pollsLeft < 1) {
      out();
      checkBudget(request, reports, seat.meter.sent, 1 + reserve, nodeCount);
    }
    const waitLeft = Math.min(seat.deadline, patient ? patienceUntil : Number.POSITIVE_INFINITY) - now;
    const gap = pollGap(turnsBack, now - started, waitLeft, pollsLeft - 1);
    recentPolls.push(now);
    if (recentPolls.length > MAX_POLLS_PER_SECOND) recentPolls.shift();
    const lease = leaseFor(Math.max(gap, MAX_AIMED_PAUSE_MS), o.requestTimeoutMs);
    const answer = await pollLine(seat, gate, keys, waiter, lease);
    if (answer === undefined) {
      if (seat.signal?.aborted) {
        out();
        throw abortedError(request.resources, reports, seat.signal.reason);
      }
      return "gate-down";
    }
    inLine = true;
    const at = o.clock.now();
    rttMs = rttMs === 0 ? at - now : (3 * rttMs + (at - now)) / 4;
    for (const [slot, until] of suspects) if (until <= at || answer.held[slot]) suspects.delete(slot);
    if (answer.rank < bestRank) {
      bestRank = answer.rank;
      patienceUntil = at + patienceMs;
    }
    const skip = (i: number) => seat.own(i) || suspects.has(i);
    let slot = slotByRank(answer.rank, answer.held, skip);
    behind = Math.max(0, answer.rank - answer.held.filter((held, i) => !held && !skip(i)).length);
    turnsBack = Math.floor(behind / Math.max(1, answer.held.length));
    const due = answer.dueMs.filter((_, i) => answer.held[i] && !seat.own(i));
    if (answer.length > 1 || slot === undefined) markHot(engine, keys[0], at + HOT_MS);
    headPolls = answer.rank === 0 && slot === undefined ? headPolls + 1 : 0;
    if (headPolls >= PROBE_EVERY && pollsLeft - 1 >= 1) {
      // First in line, and the gate shows every slot held: it may keep a key that no quorum
      // holds (a failed attempt's, its cleanup lost). Another node's view names such a slot.
      headPolls = 0;
      const other = await seat.probe(gate);
      if (other !== undefined) slot = slotByRank(0, other, skip);
    }
    if (slot !== undefined) {
      if (reports.length >= o.maxAttempts) {
        out();
        throw seat.failure();
      }
      try {
        checkBudget(request, reports, seat.meter.sent, nodeCount + 1, nodeCount);
      } catch (error) {
        out();
        throw error;
      }
      const result = await seat.trySlot(slot);
      if (result.lock) {
        out();
        return result.lock;
      }
      try {
        stopAfter(request, result.report, reports, seat.signal, false);
      } catch (error) {
        out();
        throw error;
      }
      if (
        refusalReason(
          result.report.nodes.map((n) => n.outcome),
          o.quorum,
        ) === "held"
      ) {
        suspects.set(slot, o.clock.now() + suspectMs(request.ttlMs));
      }
    } else if (patient && at >= patienceUntil) {
      out();
      throw seat.failure();
    } else if (pollsLeft - 1 < 1) {
      // No poll left after this one: waiting on could never take a slot.
      out();
      checkBudget(request, reports, seat.meter.sent, 1 + reserve, nodeCount);
    }
    const limit = Math.min(seat.deadline, patient ? patienceUntil : Number.POSITIVE_INFINITY);
    const after = o.clock.now();
    // The least pause by where we stand now, not by the place the poll was sent from.
    const least = pollGap(turnsBack, now - started, waitLeft, pollsLeft - 1);
    const wanted = Math.max(
      aimedPause(due, behind, rttMs) - (after - at),
      least - (after - at),
      windowGap(recentPolls, after, MAX_POLLS_PER_SECOND),
    );
    const pause = Math.max(0, Math.min(wanted, limit - after));
    try {
      await sleep(pause, seat.signal);
    } catch (reason) {
      out();
      throw abortedError(request.resources, reports, reason);
    }
    if (o.clock.now() >= seat.deadline) {
      out();
      throw acquireTimeout(request, reports);
    }
  }
}

/** One poll, as a one-node fan-out (the request deadline, abort and meter of every request); `undefined` when the gate did not answer. */
async function pollLine(
  seat: Seat,
  gate: number,
  keys: LineKeys,
  waiter: string,
  leaseMs: number,
): Promise<LineAnswer | undefined> {
  const { engine, o, request } = seat;
  let answer: LineAnswer | undefined;
  const fan = engine.fan(
    o,
    "acquire",
    request.resources,
    {
      yes: "verified",
      signal: seat.signal,
      meter: seat.meter,
      task: async (i, context) => {
        answer = await lineOnNode(engine.node(i), request.keys, keys, waiter, "poll", leaseMs, context);
        return "verified";
      },
    },
    o.requestTimeoutMs,
    [gate],
  );
  await fan.decided;
  return answer;
}

/** Leave the line in the background (nobody waits for it), so that those behind need not wait for our lease to run out. */
function leaveLine(seat: Seat, gate: number, keys: LineKeys, waiter: string): void {
  const { engine, o, request } = seat;
  const work = engine
    .fan(
      o,
      "acquire",
      request.resources,
      {
        yes: "verified",
        task: async (i, context) => {
          await lineOnNode(engine.node(i), request.keys, keys, waiter, "leave", 0, context);
          return "verified";
        },
      },
      o.requestTimeoutMs,
      [gate],
    )
    .outcomes.then(() => undefined);
  engine.background.track(work, o.requestTimeoutMs + 1000);
}
