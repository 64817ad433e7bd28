/**
 * The semaphore bench part's overlap checker (tools/bench/parts/permit-history.ts): the most
 * claimed windows open at once, against k. Negative controls: histories with k + 1 windows open
 * at once must be flagged, whether given whole or recorded through claim().
 */
import { describe, expect, it } from "vitest";
import { PermitHistory } from "../../../tools/bench/parts/permit-history.js";

/** A clock the test moves by hand. */
function manualClock() {
  let now = 0;
  return {
    read: () => now,
    set: (t: number) => {
      now = t;
    },
  };
}

describe("the semaphore part's overlap checker", () => {
  it("negative control: k + 1 overlapping windows are flagged", () => {
    const history = new PermitHistory();
    // k = 2; three holders all hold during [20, 30).
    history.add({ holder: "a", start: 0, end: 30 });
    history.add({ holder: "b", start: 10, end: 40 });
    history.add({ holder: "c", start: 20, end: 50 });
    expect(history.check(2)).toEqual({ windows: 3, mostAtOnce: 3, excess: true });
    // The same history is within bounds for k = 3.
    expect(history.check(3)).toEqual({ windows: 3, mostAtOnce: 3, excess: false });
  });

  it("k windows at once, and one that starts where another ends, are not flagged", () => {
    const history = new PermitHistory();
    history.add({ holder: "a", start: 0, end: 30 });
    history.add({ holder: "b", start: 10, end: 40 });
    // Starts the moment a's window closes: a's permit passed on, never three at once.
    history.add({ holder: "c", start: 30, end: 60 });
    // The same caller again, back to back with its last window.
    history.add({ holder: "b", start: 40, end: 70 });
    expect(history.check(2)).toEqual({ windows: 4, mostAtOnce: 2, excess: false });
  });

  it("claim() records windows on its clock; a caller's back-to-back windows stay apart", () => {
    const clock = manualClock();
    const history = new PermitHistory(clock.read);
    const first = history.claim("caller 0");
    clock.set(20);
    first();
    first(); // a second close changes nothing
    const second = history.claim("caller 0");
    const other = history.claim("caller 1");
    clock.set(45);
    second();
    other();
    expect(history.windows().map(({ start, end }) => [start, end])).toEqual([
      [0, 20],
      [20, 45],
      [20, 45],
    ]);
    expect(history.check(2)).toEqual({ windows: 3, mostAtOnce: 2, excess: false });
    expect(history.check(1)).toMatchObject({ mostAtOnce: 2, excess: true });
  });

  it("negative control: callers claiming without a semaphore are caught", async () => {
    const history = new PermitHistory();
    const permits = 2;
    await Promise.all(
      Array.from({ length: permits + 1 }, async (_, c) => {
        const close = history.claim(`caller ${c}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
        close();
      }),
    );
    expect(history.check(permits)).toEqual({ windows: 3, mostAtOnce: 3, excess: true });
  });

  it("an open window is not in the history until it closes", () => {
    const history = new PermitHistory();
    history.claim("caller 0");
    expect(history.check(1)).toEqual({ windows: 0, mostAtOnce: 0, excess: false });
  });
});
