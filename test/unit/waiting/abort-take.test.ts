/**
 * A caller that aborts while the poll that takes the gate is on its way back: the gate has set
 * the lock key with that poll's token. Leaving the line, the waiter must take that key with it:
 * left there, the gate answers "held" to the line for the key's whole TTL while every other node
 * is free.
 */
import { describe, expect, it } from "vitest";
import { AbortedError, type RedisArgument, type RedisNode, Redlock } from "../../../src/index.js";
import { gateIndex } from "../../../src/waiting/gate.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";
import { fakeClock, fakeNodes } from "../support/fake-node.js";
import { run, useFakeTime } from "../support/fake-time.js";

useFakeTime();

const ONE_WAY_MS = 10;
const TTL_MS = 10_000;

describe("aborting while a take is on its way back", () => {
  it.each([
    ["on its way back", "away"],
    ["as it arrives", "arrival"],
    ["in the onPoll hook that reports it", "hook"],
  ] as const)(
    "the take's answer %s: no key is left on the gate once the call has failed and settled",
    async (_, when) => {
      const nodes = fakeNodes(5);
      const gate = gateIndex(["k"], 5);
      const controller = new AbortController();
      let abortedAfterTake = false;
      /** An isolate's view of the nodes; `onReply` sees each reply as it leaves the node, or as it arrives. */
      const isolate = (onReply?: (args: readonly RedisArgument[], reply: unknown, i: number) => void): RedisNode[] =>
        nodes.map((node, i) => ({
          id: node.id,
          async command(args: readonly RedisArgument[], signal: AbortSignal) {
            await new Promise((r) => setTimeout(r, ONE_WAY_MS));
            const reply = await node.command(args, signal);
            if (when === "away") onReply?.(args, reply, i);
            await new Promise((r) => setTimeout(r, ONE_WAY_MS));
            if (when === "arrival") onReply?.(args, reply, i);
            return reply;
          },
        }));
      const holder = new Redlock({ nodes: isolate(), clock: fakeClock });
      const aborter = new Redlock({
        nodes: isolate((args, reply, i) => {
          const take = i === gate && args[1] === gateScript.sha1 && Array.isArray(reply) && reply[0] === 1;
          if (take && !abortedAfterTake) {
            abortedAfterTake = true;
            controller.abort(new Error("the caller gave up"));
          }
        }),
        clock: fakeClock,
        onPoll: (event) => {
          if (when === "hook" && event.outcome.outcome === "acquired" && !abortedAfterTake) {
            abortedAfterTake = true;
            controller.abort(new Error("the caller gave up"));
          }
        },
      });
      const held = await run(holder.acquire("k", TTL_MS));
      const aborting = aborter.acquire("k", TTL_MS, { signal: controller.signal }).catch((e: unknown) => e);
      await run(new Promise((r) => setTimeout(r, 200)));
      await run(held.release());
      expect(await run(aborting)).toBeInstanceOf(AbortedError);
      expect(abortedAfterTake, "the abort came after the gate set the key for the aborter").toBe(true);
      await run(aborter.settled());
      await run(holder.settled());
      // Nobody holds the lock: no node may keep a key for it.
      expect(nodes.map((n) => n.get(held.keys[0] as string) ?? null)).toEqual([null, null, null, null, null]);
    },
  );
});
