/**
 * Work that runs after an operation has answered its caller: the cleanup of failed attempts and
 * the slow nodes of a release. Every piece has a deadline, so waiting for it always ends.
 * @module
 */
import { backgroundTimeout, within } from "../base/signals.js";

/** What `Redlock.settled()` resolves with. */
export interface SettledResult {
  /**
   * Pieces of background work abandoned at their deadline since the previous `settled()` call:
   * a node that ignores its abort signal, for instance. Their keys expire by their TTL.
   */
  readonly abandoned: number;
}

/**
 * How long past the latest deadline `settled()` waits on a timer of its own: the pieces' own
 * timers, when they can still fire, come first.
 */
const SETTLED_GRACE_MS = 100;

/** A set of background promises, each bounded by its own deadline. */
export class BackgroundWork {
  /** Each piece: its `Date.now()` deadline, and how to abandon it there. */
  readonly #pending = new Map<Promise<void>, { deadline: number; abandon: () => void }>();
  #abandoned = 0;

  /** Track `work`; it counts as abandoned if it has not settled `deadlineMs` from now. */
  track(work: Promise<unknown>, deadlineMs: number): void {
    let abandon = () => {};
    const bounded = new Promise<void>((resolve) => {
      abandon = () => {
        // Counted once, by whichever notices first: this timer or settled().
        if (this.#pending.delete(bounded)) this.#abandoned++;
        resolve();
      };
      // Unreferenced: background work alone does not keep a process alive; settled() does.
      const timer = backgroundTimeout(abandon, deadlineMs);
      const done = () => {
        clearTimeout(timer);
        this.#pending.delete(bounded);
        resolve();
      };
      work.then(done, done);
    });
    this.#pending.set(bounded, { deadline: Date.now() + deadlineMs, abandon });
  }

  /**
   * Resolves once every piece tracked so far, and any started meanwhile, has settled or been
   * abandoned. Waits on timers of its own: on Workers, work started by a request that has ended
   * never settles (its I/O and timers are cancelled with it), and a caller in another request
   * must not wait for it forever.
   */
  async settled(): Promise<SettledResult> {
    const before = this.#abandoned;
    // Keep the process alive while someone waits: the work's own timers are unreferenced.
    const keepAlive = setInterval(() => {}, 60_000);
    try {
      while (this.#pending.size > 0) {
        const pieces = [...this.#pending.values()];
        const latest = Math.max(...pieces.map((piece) => piece.deadline));
        const all = Promise.all(this.#pending.keys()).then(() => true);
        if ((await within(all, latest - Date.now() + SETTLED_GRACE_MS)) === undefined) {
          for (const piece of pieces) piece.abandon();
        }
      }
    } finally {
      clearInterval(keepAlive);
    }
    return { abandoned: this.#abandoned - before };
  }
}
