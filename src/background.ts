/**
 * Work that runs after an operation has answered its caller: the cleanup of failed attempts and
 * the slow nodes of a release. Every piece has a deadline, so waiting for it always ends.
 * @module
 */
import { backgroundTimeout } from "./signals.js";

/** What {@link BackgroundWork.settled} resolves with. */
export interface SettledResult {
  /**
   * Pieces of background work abandoned at their deadline since the previous `settled()` call:
   * a node that ignores its abort signal, for instance. Their keys expire by their TTL.
   */
  readonly abandoned: number;
}

/** A set of background promises, each bounded by its own deadline. */
export class BackgroundWork {
  readonly #pending = new Set<Promise<void>>();
  #abandoned = 0;

  /**
   * Track `work`; it counts as abandoned if it has not settled `deadlineMs` from now. Without a
   * deadline, `work` must be bounded by one of its own (a fan-out's outcomes, for instance).
   */
  track(work: Promise<unknown>, deadlineMs?: number): void {
    const bounded = new Promise<void>((resolve) => {
      // Unreferenced: background work alone does not keep a process alive; settled() does.
      const timer =
        deadlineMs === undefined
          ? undefined
          : backgroundTimeout(() => {
              this.#abandoned++;
              resolve();
            }, deadlineMs);
      const done = () => {
        if (timer !== undefined) clearTimeout(timer);
        resolve();
      };
      work.then(done, done);
    });
    this.#pending.add(bounded);
    void bounded.then(() => this.#pending.delete(bounded));
  }

  /** Resolves once every piece tracked so far, and any started meanwhile, has settled or been abandoned. */
  async settled(): Promise<SettledResult> {
    const before = this.#abandoned;
    // Keep the process alive while someone waits: the work's own timers are unreferenced.
    const keepAlive = setInterval(() => {}, 60_000);
    try {
      while (this.#pending.size > 0) await Promise.all(this.#pending);
    } finally {
      clearInterval(keepAlive);
    }
    return { abandoned: this.#abandoned - before };
  }
}
