/**
 * Checker 3: no release or extension ever deleted or re-armed a key that held another client's
 * token.
 *
 * Source of truth: each node's MONITOR stream, which Redis feeds in execution order, a script's
 * own calls (`[0 lua] "DEL" "key"`) right after its EVAL/EVALSHA line. The checker replays the
 * stream (see `replay.ts`) and, for each DEL or PEXPIRE made inside a release or extend script,
 * asks whether the key could have held the token the script was called with. An anomaly is
 * reported only when *no* possible state held it.
 * @module
 */
import type { HistoryEvent } from "../history.js";
import { ANY, monitorStreams, NodeReplay } from "./replay.js";

export { EXPIRY_SLACK_MS } from "./replay.js";

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
 * Replays every node's MONITOR events and reports foreign touches.
 * @param maxTtlMs the longest TTL any client uses: a key of unknown content has surely expired that
 *   long after the node restarted.
 */
export function checkForeignTouches(history: readonly HistoryEvent[], maxTtlMs: number): ForeignTouchResult {
  const anomalies: ForeignTouch[] = [];
  let touches = 0;
  for (const [node, events] of monitorStreams(history)) {
    const replay = new NodeReplay(maxTtlMs);
    for (const e of events) {
      const touch = replay.apply(e);
      if (!touch) continue;
      touches++;
      if (touch.before.some((s) => s.value === touch.token || s.value === ANY)) continue;
      anomalies.push({
        node,
        seq: touch.event.seq,
        t: touch.event.t,
        key: touch.event.key as string,
        script: touch.script,
        cmd: touch.event.cmd,
        token: touch.token,
        possible: touch.before.map((s) => s.value),
      });
    }
  }
  return { touches, anomalies };
}
