/**
 * The gate scripts on a real redis-server answer like their in-memory model in
 * test/unit/support/fake-gate.ts, on the same sequence of operations: the unit tests of waiting
 * rest on that model.
 */
import { describe, expect, inject, it } from "vitest";
import { gateKeys, pollGate, releaseOnGate } from "../../src/gate.js";
import { restNode } from "../../src/index.js";
import { type GateStore, runGate, runGateRelease } from "../unit/support/fake-gate.js";
import { uniqueKey } from "./support/nodes.js";

const nodes = inject("nodes");

/** A model store on the real clock, like the server's. */
function modelStore(): GateStore {
  const keys = new Map<string, { value: string; expiresAt: number }>();
  const live = (key: string) => {
    const entry = keys.get(key);
    return entry && entry.expiresAt > Date.now() ? entry : undefined;
  };
  return {
    get: (key) => live(key)?.value,
    pttl: (key) => {
      const entry = live(key);
      return entry ? entry.expiresAt - Date.now() : -2;
    },
    set: (key, value, ttlMs) => {
      keys.set(key, { value, expiresAt: Date.now() + ttlMs });
    },
    del: (key) => (keys.delete(key) ? 1 : 0),
    now: () => Date.now(),
  };
}

describe("gate scripts: Lua and model agree", () => {
  it("on takes, waits, leaves and releases by several waiters", async () => {
    const node = restNode(nodes[0] as { url: string; token: string });
    const model = modelStore();
    const key = uniqueKey("gate-diff");
    const keys = [key, ...gateKeys([key])];
    const context = () => ({ signal: AbortSignal.timeout(5000), countRequest() {} });
    const steps: [string, "take" | "wait" | "leave" | "release", string][] = [
      ["w1", "take", "t1".repeat(20)],
      ["w2", "take", "t2".repeat(20)],
      ["w3", "wait", "t3".repeat(20)],
      ["w2", "take", "t2".repeat(20)],
      ["w1", "release", "t1".repeat(20)],
      ["w3", "take", "t3".repeat(20)],
      ["w2", "take", "t2".repeat(20)],
      ["w4", "take", "t4".repeat(20)],
      ["w2", "release", "t2".repeat(20)],
      ["w4", "leave", "-"],
      ["w3", "take", "t3".repeat(20)],
      ["w3", "release", "t3".repeat(20)],
    ];
    for (const [waiter, mode, token] of steps) {
      if (mode === "release") {
        const real = await releaseOnGate(node, [key], token, 5000, context());
        const modelled = runGateRelease(model, keys, [token, "1", "5000"]) as number[];
        expect(real, `${waiter} ${mode}`).toEqual({
          outcome: modelled[0] ? "released" : "not-held",
          waiting: modelled[1],
        });
        continue;
      }
      const request = { waiter, mode, token, ttlMs: 5000, leaseMs: 5000, ticket: 0 } as const;
      const real = await pollGate(node, [key], request, context());
      const [taken, rank, pttl, , , ticket] = runGate(model, keys, [
        waiter,
        mode,
        token,
        "5000",
        "5000",
        "1",
        "0",
      ]) as number[];
      const label = `${waiter} ${mode}`;
      expect(real.taken, label).toBe(taken === 1);
      expect(real.rank, label).toBe(rank);
      expect(real.ticket, label).toBe(ticket);
      // PTTLs are read a few milliseconds apart.
      expect(Math.abs(real.pttlMs - (pttl as number)), label).toBeLessThan(1000);
      expect(real.pttlMs === -2, label).toBe(pttl === -2);
    }
  });
});
