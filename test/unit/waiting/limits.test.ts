/**
 * The request budget's reckoning before a take aimed at a release (`limits.roomForAim`): the take
 * is a fan-out that may come early, and the call must still be able to poll and take after it.
 */
import { describe, expect, it } from "vitest";
import { roomForAim, roomForPoll } from "../../../src/waiting/limits.js";
import type { Waiter } from "../../../src/waiting/state.js";

/** The parts of a waiter the budget's checks read: its options, its nodes and what it has sent. */
function waiterAt(sent: number, nodes: number, requestBudget: number, fencing = false): Waiter {
  const quorum = Math.floor(nodes / 2) + 1;
  return {
    o: { requestBudget, quorum, fencing },
    engine: { nodes: Array.from({ length: nodes }) },
    takeCost: fencing ? 2 * nodes : nodes,
    requestsSent: () => sent,
  } as unknown as Waiter;
}

describe("roomForAim", () => {
  it("aims only when a take that came early, its cleanup, a poll, a take and the release still fit", () => {
    let aimed = 0;
    for (const nodes of [1, 3, 5, 7]) {
      const quorum = Math.floor(nodes / 2) + 1;
      for (const budget of [2 * nodes + 2, 40, 50, 200]) {
        let last = -1;
        for (let sent = 0; sent <= budget; sent++) {
          if (!roomForAim(waiterAt(sent, nodes, budget))) continue;
          aimed++;
          last = sent;
          // Refused, at most quorum - 1 nodes said yes or had not answered: the cleanup undoes them.
          const afterEarlyTake = sent + nodes + (quorum - 1);
          expect(
            roomForPoll(waiterAt(afterEarlyTake, nodes, budget)),
            `N ${nodes}, budget ${budget}, sent ${sent}`,
          ).toBe(true);
        }
        // Not stricter than that: the last request count that aims is the last that can follow up.
        const followUp = nodes + (quorum - 1) + 1 + nodes + nodes;
        expect(last, `N ${nodes}, budget ${budget}`).toBe(budget >= followUp ? budget - followUp : -1);
      }
    }
    expect(aimed).toBeGreaterThan(100);
  });

  it("never aims a fenced take", () => {
    expect(roomForAim(waiterAt(0, 5, 1000, true))).toBe(false);
  });
});
