/**
 * Checker 3: no release or extension ever deleted or re-armed a key that held another client's
 * token.
 *
 * Source of truth: each node's MONITOR stream, which Redis feeds in execution order, a script's
 * own calls (`[0 lua] "DEL" "key"`) right after its EVAL/EVALSHA line. The checker replays the
 * stream into a model of every lock key (value and expiry, on the server's own timestamps) and,
 * for each DEL or PEXPIRE made inside a release or extend script, asks whether the key could have
 * held the token the script was called with.
 *
 * The replay is deliberately unsure where the stream cannot tell: around an expiry (within
 * {@link EXPIRY_SLACK_MS}) a key may or may not exist, so the model keeps every possible state; after
 * a node restarted empty or the audit connection lost lines, the key may hold anything until it is
 * next deleted or has surely expired. An anomaly is reported only when *no* possible state held
 * the script's token.
 * @module
 */
import type { HistoryEvent, MonitorEvent, MonitorResetEvent } from "../history.js";

/** One touch of a foreign key. */
export interface ForeignTouch {
  readonly node: number;
  readonly seq: number;
  readonly t: number;
  readonly key: string;
  readonly script: string;
  readonly cmd: string;
  /** Hash of the token the script was called with. */
  readonly token: string;
  /** Hashes the key could have held instead (`null`: missing). */
  readonly possible: readonly (string | null)[];
}

/** What checker 3 found. */
export interface ForeignTouchResult {
  /** DEL and PEXPIRE calls made by release and extend scripts. */
  readonly touches: number;
  readonly anomalies: readonly ForeignTouch[];
}

/**
 * Uncertainty of an expiry time seen through MONITOR time stamps, ms. Redis stamps a MONITOR line
 * when it feeds it, just after the command ran, while the expiry counts from the command's own
 * start; a descheduled redis-server on a loaded machine can stamp late. Only a key that expires
 * within this window of an access is treated as "maybe there".
 * @default 100
 */
export const EXPIRY_SLACK_MS = 100;

/** A possible state of one key: its value (null: absent) and expiry (server ms). `ANY` matches every value. */
type KeyState = { value: string | null; expiresAt: number | null };
const ANY = "\u0000any";
const MAX_STATES = 16;

/**
 * Replays every node's MONITOR events and reports foreign touches.
 * @param maxTtlMs the longest TTL any client uses: a key of unknown content has surely expired that
 *   long after the node restarted.
 */
export function checkForeignTouches(history: readonly HistoryEvent[], maxTtlMs: number): ForeignTouchResult {
  const perNode = new Map<number, (MonitorEvent | MonitorResetEvent)[]>();
  for (const e of history) {
    if (e.f !== "monitor" && e.f !== "monitor-reset") continue;
    const node = (e as MonitorEvent).node;
    const list = perNode.get(node) ?? [];
    list.push(e as MonitorEvent | MonitorResetEvent);
    perNode.set(node, list);
  }
  const anomalies: ForeignTouch[] = [];
  let touches = 0;
  for (const [node, events] of perNode) {
    events.sort((a, b) => a.seq - b.seq);
    const keys = new Map<string, KeyState[]>();
    /** Keys of unknown content since a reset at `unknownSince` (server ms), until they surely expired. */
    let unknownSince: number | undefined;
    let script: { name: string; token: string | undefined } | undefined;

    const statesAt = (key: string, t: number): KeyState[] => {
      let states = keys.get(key);
      if (!states) {
        states =
          unknownSince !== undefined && t <= unknownSince + maxTtlMs + EXPIRY_SLACK_MS
            ? [
                { value: ANY, expiresAt: unknownSince + maxTtlMs },
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
    };

    for (const e of events) {
      if (e.f === "monitor-reset") {
        keys.clear();
        unknownSince = e.t;
        script = undefined;
        continue;
      }
      if (e.source === "client") {
        script = e.cmd === "EVAL" || e.cmd === "EVALSHA" ? { name: e.script ?? "other", token: e.value } : undefined;
      }
      if (!e.key) continue;
      const states = statesAt(e.key, e.t);
      if (e.cmd === "SET" && e.source === "client") {
        const value = e.value ?? ANY;
        const expiresAt = e.ms === undefined ? null : e.t + e.ms;
        const after = states.flatMap((s): KeyState[] =>
          !e.nx || s.value === null ? [{ value, expiresAt }] : s.value === ANY ? [s, { value, expiresAt }] : [s],
        );
        keys.set(e.key, dedupe(after));
      } else if (e.cmd === "DEL" || e.cmd === "PEXPIRE" || e.cmd === "UNLINK") {
        const guarded = e.source === "lua" && script && (script.name === "release" || script.name === "extend");
        let kept = states;
        if (guarded && script?.token !== undefined) {
          touches++;
          kept = states.filter((s) => s.value === script?.token || s.value === ANY);
          if (kept.length === 0) {
            anomalies.push({
              node,
              seq: e.seq,
              t: e.t,
              key: e.key,
              script: script.name,
              cmd: e.cmd,
              token: script.token,
              possible: states.map((s) => s.value),
            });
            kept = states;
          }
        }
        if (e.cmd === "PEXPIRE") {
          const ms = e.ms ?? 0;
          const after = kept.map((s) =>
            s.value === null ? s : ms <= 0 ? { value: null, expiresAt: null } : { ...s, expiresAt: e.t + ms },
          );
          keys.set(e.key, dedupe(after));
        } else {
          keys.set(e.key, [{ value: null, expiresAt: null }]);
        }
      } else {
        keys.set(e.key, states);
      }
    }
  }
  return { touches, anomalies };
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
