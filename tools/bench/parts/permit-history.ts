/**
 * The semaphore part's overlap checker: a history of claimed windows (from the moment a caller
 * learnt it holds a permit to the moment it started to release it), all read on one clock (the
 * benchmark's process, where every caller runs), and the most windows open at once. A safe
 * semaphore of k permits never has more than k open; the count uses the chaos harness's checker
 * (tools/chaos/checkers/primitives.ts), so the bench and the harness count alike.
 */
import { checkPermits, type Window } from "../../chaos/checkers/primitives.js";

/** What the checker found in one history. */
export interface PermitCheck {
  /** Windows in the history. */
  windows: number;
  /** The most windows open at once. */
  mostAtOnce: number;
  /** Whether more than `permits` were open at once. */
  excess: boolean;
}

/** Claimed windows of one semaphore, on `performance.now()` unless given a clock. */
export class PermitHistory {
  readonly #windows: Window[] = [];
  readonly #clock: () => number;
  #serial = 0;

  /** @param clock the one clock every window is read on. @default performance.now */
  constructor(clock: () => number = () => performance.now()) {
    this.#clock = clock;
  }

  /**
   * Opens a window for `holder` now; the returned function closes it (call it before sending the
   * release, so that the window never outlasts what the holder may believe).
   */
  claim(holder: string): () => void {
    const start = this.#clock();
    // One name per window: a caller's next window may start where its last one ended.
    const name = `${holder}#${this.#serial++}`;
    let closed = false;
    return () => {
      if (closed) return;
      closed = true;
      this.#windows.push({ holder: name, start, end: this.#clock() });
    };
  }

  /** Adds a window read elsewhere on the same clock (tests, replays). */
  add(window: Window): void {
    this.#windows.push({ ...window, holder: `${window.holder}#${this.#serial++}` });
  }

  /** The closed windows so far. */
  windows(): readonly Window[] {
    return this.#windows;
  }

  /** The most windows open at once, against `permits`. */
  check(permits: number): PermitCheck {
    const result = checkPermits(this.#windows, permits);
    return { windows: result.windows, mostAtOnce: result.mostAtOnce, excess: result.anomaly !== undefined };
  }
}
