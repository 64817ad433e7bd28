/**
 * The gate scripts (src/waiting/scripts/gate.ts, gate-release.ts) in TypeScript, for the memory
 * node. The real scripts keep a gate's line in three keys beside the lock keys (a queue, leases
 * and a stats hash); this model keeps the same facts in one object per gate, apart from the
 * keyspace. test/integration/gate-differential.test.ts checks that it answers like the Lua on a
 * real redis-server, step for step.
 * @module
 */
import type { RedisReply } from "../transport/rest.js";

/** What the gate needs of a node: string keys with expiry, the node's time, and its gates' state. */
export interface GateStore {
  get(key: string): string | undefined;
  /** Remaining TTL in ms: -2 when missing, -1 without a TTL. */
  pttl(key: string): number;
  set(key: string, value: string, ttlMs: number): void;
  del(key: string): number;
  now(): number;
  /** Each gate's line and statistics, by its queue key (emptied when the node restarts). */
  readonly gates: Map<string, GateState>;
}

/** One gate's line and what it learned of holds, as the Lua keeps it in its queue, leases and stats keys. */
export interface GateState {
  queue: Map<string, number>;
  leases: Map<string, number>;
  seq: number;
  hold: number;
  ttl: number;
  released: number;
  /** When the lock was last taken at the gate. */
  took: number;
  dev: number;
  cycle: number;
  contended: number;
  taker: string;
  /** Whether the last take was a poll's (not aimed at the release). */
  polled: boolean;
  /** Average lead reported by releases of holds taken by a poll. */
  lead: number;
  /** How long the taker `expecter`'s isolate holds the lock, as its take told (0: unknown). */
  expect: number;
  expecter: string;
  turns: number;
  /** Whether the stats hash exists on the node (a waiter polled, a take or a recorded release). */
  written: boolean;
  /** When a poll last found the lock keys partly held (another resource set holds shared keys). */
  foreign: number;
  /** Takes in a row that found the keys free with no release through the gate since the take before. */
  unreleased: number;
  /**
   * When a poll first found the lock free with nothing to tell when it came free (no release
   * through the gate, no hold to estimate one by), 0 otherwise: the first in line's time counts from it.
   */
  seen: number;
  /** When the gate last told the first in line the lock would free up (0 after a take): its half hold counts from there when that is later than the release. */
  due: number;
}

function stateOf(store: GateStore, queueKey: string): GateState {
  let state = store.gates.get(queueKey);
  if (!state) {
    state = {
      queue: new Map(),
      leases: new Map(),
      seq: 0,
      hold: 0,
      ttl: 0,
      released: 0,
      took: 0,
      dev: 0,
      cycle: 0,
      contended: 0,
      taker: "",
      polled: false,
      lead: 0,
      expect: 0,
      expecter: "",
      turns: 0,
      written: false,
      foreign: 0,
      unreleased: 0,
      seen: 0,
      due: 0,
    };
    store.gates.set(queueKey, state);
  }
  return state;
}

function rankOf(state: GateState, waiter: string): number {
  const ticket = state.queue.get(waiter);
  if (ticket === undefined) return -1;
  let rank = 0;
  for (const other of state.queue.values()) if (other < ticket) rank++;
  return rank;
}

function purge(state: GateState, now: number): void {
  for (const [waiter, lease] of state.leases) {
    if (lease <= now) {
      state.leases.delete(waiter);
      state.queue.delete(waiter);
    }
  }
}

/** The gate script (see src/waiting/scripts/gate.ts for its KEYS, ARGV and reply). */
export function runGate(store: GateStore, keys: string[], argv: string[]): RedisReply {
  const n = Number(argv[5]);
  const lockKeys = keys.slice(0, n);
  const state = stateOf(store, keys[n] as string);
  const [waiter, mode, token, ttl, lease] = argv as [string, string, string, string, string];
  const now = store.now();
  purge(state, now);
  if (mode === "leave") {
    state.queue.delete(waiter);
    state.leases.delete(waiter);
    for (const key of lockKeys) if (store.get(key) === token) store.del(key);
    return [0, -1, -2, 0, 0, 0, 0, 0, 0, 0, 0];
  }
  let pttl = -2;
  let held = 0;
  for (const key of lockKeys) {
    const p = store.pttl(key);
    if (p !== -2) held++;
    if (p !== -2 && (p === -1 || p > pttl)) pttl = p;
  }
  if (held > 0 && held < n) {
    state.foreign = now;
    state.written = true;
  }
  const contested = state.foreign > 0 && now - state.foreign < 2000 ? 1 : 0;
  let ticket = state.queue.get(waiter) ?? 0;
  if (ticket === 0) {
    ticket = Number(argv[6]);
    if (ticket <= 0) {
      ticket = ++state.seq;
      state.written = true;
    }
    state.queue.set(waiter, ticket);
  }
  const rank = rankOf(state, waiter);
  let freed = state.released === 0 && state.took > 0 && state.hold > 0 ? state.took + state.hold : state.released;
  if (freed === 0 && pttl === -2) {
    if (state.seen === 0) {
      state.seen = now;
      state.written = true;
    }
    freed = state.seen;
  } else if (pttl !== -2) state.seen = 0;
  if (state.due > freed) freed = state.due;
  const late = freed > 0 && now - freed > Math.max(20, Math.floor(state.hold / 2));
  if ((mode === "take" || mode === "aim") && pttl === -2 && (rank === 0 || late)) {
    for (const key of lockKeys) store.set(key, token, Number(ttl));
    state.queue.delete(waiter);
    state.leases.delete(waiter);
    const ago = state.released > 0 ? now - state.released : -1;
    state.unreleased = state.released === 0 && state.took > 0 ? state.unreleased + 1 : 0;
    state.released = 0;
    state.seen = 0;
    state.due = 0;
    state.took = now;
    state.taker = token;
    state.polled = mode !== "aim";
    state.expect = Number(argv[7] ?? 0) || 0;
    state.expecter = token;
    state.written = true;
    return [1, 0, -2, ago, state.hold, ticket, state.dev, state.cycle, state.turns, 0, state.unreleased];
  }
  state.leases.set(waiter, now + Number(lease));
  let freeIn = 0;
  if (pttl !== -2) {
    freeIn = pttl;
    let elapsed = state.ttl > 0 && pttl <= state.ttl ? state.ttl - pttl : -1;
    // A holder that took the lock at the gate has held it since, whatever it extended; one that
    // took it after a placeholder or lock ran out is no hold to predict.
    const byTaker = state.took > 0 && store.get(lockKeys[0] as string) === state.taker;
    if (byTaker && now - state.took > elapsed) elapsed = now - state.took;
    if (state.hold > 0 && pttl > 0 && elapsed >= 0) {
      const lead = byTaker && state.polled ? state.lead : 0;
      const expect = byTaker && state.expecter === state.taker && state.expect > 0 ? state.expect : state.hold;
      const predicted = byTaker && state.unreleased > 0 ? 0 : Math.max(0, expect + lead - elapsed);
      if (predicted < pttl) {
        freeIn = predicted;
        if (rank === 0 && predicted > 0) state.due = now + predicted;
      }
    }
  }
  return [0, rank, pttl, freeIn, state.hold, ticket, state.dev, state.cycle, state.turns, contested, 0];
}

/** The gate-release script (see src/waiting/scripts/gate-release.ts for its KEYS, ARGV and reply). */
export function runGateRelease(store: GateStore, keys: string[], argv: string[]): RedisReply {
  const n = Number(argv[1]);
  const ttl = Number(argv[2]);
  const left = store.pttl(keys[0] as string);
  let deleted = 0;
  for (const key of keys.slice(0, n)) if (store.get(key) === argv[0]) deleted += store.del(key);
  const state = stateOf(store, keys[n] as string);
  const now = store.now();
  let waiting = 0;
  for (const lease of state.leases.values()) if (lease >= now) waiting++;
  const since = state.took > 0 && now - state.took > ttl - left ? now - state.took : ttl - left;
  const lead = Number(argv[5] ?? 0) || 0;
  const held = lead > 0 && lead < since ? since - lead : since;
  let learned = 0;
  if (deleted > 0 && left > 0 && left <= ttl && state.taker === argv[0]) {
    learned = held;
    if (state.hold === 0) {
      state.hold = held;
      state.dev = 0;
    } else {
      state.dev = Math.floor((3 * state.dev + Math.abs(held - state.hold)) / 4);
      state.hold = held < state.hold ? Math.floor((state.hold + held) / 2) : Math.floor((3 * state.hold + held) / 4);
    }
    state.ttl = ttl;
    if (lead > 0) state.lead = state.lead > 0 ? Math.floor((3 * state.lead + lead) / 4) : lead;
  }
  if (deleted > 0 && (waiting > 0 || state.written)) {
    state.written = true;
    if (state.contended > 0 && now > state.contended) {
      const interval = now - state.contended;
      state.cycle = state.cycle === 0 ? interval : Math.floor((3 * state.cycle + interval) / 4);
    }
    state.contended = waiting === 0 ? 0 : now;
    state.released = now;
    state.turns++;
  }
  let handed = 0;
  let ahead = waiting;
  const [, , , , , , next, nextTtl, nextWaiter] = argv;
  if (next) {
    purge(state, now);
    const rank = rankOf(state, nextWaiter as string);
    const free =
      (rank === 0 || (rank === -1 && state.queue.size === 0)) &&
      keys.slice(0, n).every((key) => store.get(key) === undefined);
    if (free) {
      for (const key of keys.slice(0, n)) store.set(key, next, Number(nextTtl));
      state.queue.delete(nextWaiter as string);
      state.leases.delete(nextWaiter as string);
      state.released = 0;
      state.taker = next;
      state.took = now;
      state.unreleased = 0;
      state.polled = false;
      state.expect = Number(argv[9] ?? 0) || 0;
      state.expecter = next;
      state.written = true;
      handed = 1;
      if (rank >= 0) ahead--;
    }
  }
  let ticket = 0;
  const [, , , requeue, lease] = argv;
  if (deleted > 0 && waiting > 0 && requeue) {
    ticket = ++state.seq;
    state.queue.set(requeue, ticket);
    state.leases.set(requeue, now + Number(lease));
  }
  let head = 0;
  if (deleted > 0) {
    let lowest = Number.POSITIVE_INFINITY;
    let first: string | undefined;
    for (const [waiter, t] of state.queue) {
      if (t < lowest) {
        lowest = t;
        first = waiter;
      }
    }
    if (first !== undefined && (state.leases.get(first) ?? 0) > now) head = lowest;
  }
  return [deleted, ahead, ticket, state.hold, state.dev, state.cycle, state.turns, handed, head, learned];
}
