/**
 * A replay of one node's MONITOR stream into the possible states of every lock key: its value
 * (a token hash, or none) and its expiry, on the server's own time stamps. Shared by checker 3
 * (who touched which key) and the log half of checker 2 (did a quorum hold the key until the
 * claimed deadline).
 *
 * The replay is deliberately unsure where the stream cannot tell: around an expiry (within
 * {@link EXPIRY_SLACK_MS}) a key may or may not exist, so every possible state is kept; after a
 * node restarted empty or the audit connection lost lines, a key may hold anything until it is
 * next deleted or has surely expired.
 * @module
 */
import type { MonitorEvent, MonitorResetEvent } from "../history.js";

/**
 * Uncertainty of an expiry time seen through MONITOR time stamps, ms. Redis stamps a MONITOR line
 * when it feeds it, around the time the command runs, while the expiry counts from the command's
 * own clock reading; a descheduled redis-server on a loaded machine can stamp late. Only a key that
 * expires within this window of an access is treated as "maybe there".
 * @default 100
 */
export const EXPIRY_SLACK_MS = 100;

/** A possible state of one key: its value (null: absent) and expiry (server ms, null: none). */
export interface KeyState {
  readonly value: string | null;
  readonly expiresAt: number | null;
}

/** A value that matches every token: the key's content is unknown. */
export const ANY = "\u0000any";
const MAX_STATES = 16;

/** A DEL or PEXPIRE made inside the library's release or extend script. */
export interface GuardedTouch {
  readonly event: MonitorEvent;
  readonly script: "release" | "extend";
  /** Hash of the token the script was called with. */
  readonly token: string;
  /** The key's possible states just before. */
  readonly before: readonly KeyState[];
}

/** Replays one node. */
export class NodeReplay {
  readonly #keys = new Map<string, KeyState[]>();
  readonly #maxTtlMs: number;
  /** Keys of unknown content since a reset at this time (server ms), until they surely expired. */
  #unknownSince: number | undefined;
  #script: { name: string; token: string | undefined } | undefined;

  /** @param maxTtlMs the longest TTL any client uses. */
  constructor(maxTtlMs: number) {
    this.#maxTtlMs = maxTtlMs;
  }

  /** The key's possible states at time `t` (expiries applied), without changing the replay. */
  statesAt(key: string, t: number): KeyState[] {
    let states = this.#keys.get(key);
    if (!states) {
      const since = this.#unknownSince;
      states =
        since !== undefined && t <= since + this.#maxTtlMs + EXPIRY_SLACK_MS
          ? [
              { value: ANY, expiresAt: since + this.#maxTtlMs },
              { value: null, expiresAt: null },
            ]
          : [{ value: null, expiresAt: null }];
    }
    // Expire: surely gone well past the expiry, maybe gone close to it.
    const next: KeyState[] = [];
    for (const s of states) {
      if (s.value === null || s.expiresAt === null) next.push(s);
      else if (t > s.expiresAt + EXPIRY_SLACK_MS) next.push({ value: null, expiresAt: null });
      else if (t >= s.expiresAt - EXPIRY_SLACK_MS) next.push(s, { value: null, expiresAt: null });
      else next.push(s);
    }
    return dedupe(next);
  }

  /** Whether the key may hold `token` at time `t`. */
  mayHold(key: string, token: string, t: number): boolean {
    return this.statesAt(key, t).some((s) => s.value === token || s.value === ANY);
  }

  /** Applies the next event of the stream; returns the guarded touch it is, if any. */
  apply(e: MonitorEvent | MonitorResetEvent): GuardedTouch | undefined {
    if (e.f === "monitor-reset") {
      this.#keys.clear();
      this.#unknownSince = e.t;
      this.#script = undefined;
      return undefined;
    }
    if (e.source === "client") {
      this.#script =
        e.cmd === "EVAL" || e.cmd === "EVALSHA" ? { name: e.script ?? "other", token: e.value } : undefined;
    }
    if (!e.key) return undefined;
    const states = this.statesAt(e.key, e.t);
    // A SET from a client or from a script (the all-or-none acquire, the gate's take): scripts
    // check the keys before they set them, so what they set is the new state.
    if (e.cmd === "SET") {
      const value = e.value ?? ANY;
      const expiresAt = e.ms === undefined ? null : e.t + e.ms;
      const after = states.flatMap((s): KeyState[] =>
        !e.nx || s.value === null ? [{ value, expiresAt }] : s.value === ANY ? [s, { value, expiresAt }] : [s],
      );
      this.#keys.set(e.key, dedupe(after));
      return undefined;
    }
    if (e.cmd !== "DEL" && e.cmd !== "PEXPIRE" && e.cmd !== "UNLINK") {
      this.#keys.set(e.key, states);
      return undefined;
    }
    const script = this.#script;
    let touch: GuardedTouch | undefined;
    let kept = states;
    if (e.source === "lua" && script && (script.name === "release" || script.name === "extend") && script.token) {
      touch = { event: e, script: script.name, token: script.token, before: states };
      // The script ran only because the key held its token; if no state says so, keep them all.
      const matching = states.filter((s) => s.value === script.token || s.value === ANY);
      if (matching.length > 0) kept = matching;
    }
    if (e.cmd === "PEXPIRE") {
      const ms = e.ms ?? 0;
      const after = kept.map((s) =>
        s.value === null ? s : ms <= 0 ? { value: null, expiresAt: null } : { ...s, expiresAt: e.t + ms },
      );
      this.#keys.set(e.key, dedupe(after));
    } else {
      this.#keys.set(e.key, [{ value: null, expiresAt: null }]);
    }
    return touch;
  }
}

/** Every node's MONITOR events, each node's in stream order. */
export function monitorStreams(history: readonly { f: string }[]): Map<number, (MonitorEvent | MonitorResetEvent)[]> {
  const perNode = new Map<number, (MonitorEvent | MonitorResetEvent)[]>();
  for (const e of history) {
    if (e.f !== "monitor" && e.f !== "monitor-reset") continue;
    const event = e as MonitorEvent | MonitorResetEvent;
    const list = perNode.get(event.node) ?? [];
    list.push(event);
    perNode.set(event.node, list);
  }
  for (const list of perNode.values()) list.sort((a, b) => a.seq - b.seq);
  return perNode;
}

function dedupe(states: KeyState[]): KeyState[] {
  const seen = new Set<string>();
  const out: KeyState[] = [];
  for (const s of states) {
    const id = `${s.value}|${s.expiresAt}`;
    if (!seen.has(id)) {
      seen.add(id);
      out.push(s);
    }
  }
  if (out.length <= MAX_STATES) return out;
  // Too many possibilities to track: widen to "anything until the latest expiry", never narrower.
  const latest = out.reduce<number | null>(
    (m, s) => (s.expiresAt === null || m === null ? (s.value === null ? m : null) : Math.max(m, s.expiresAt)),
    0,
  );
  return [
    { value: ANY, expiresAt: latest },
    { value: null, expiresAt: null },
  ];
}
