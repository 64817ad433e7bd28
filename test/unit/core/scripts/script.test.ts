/**
 * Running a script on a node: `EVALSHA`, then `EVAL` after `NOSCRIPT`; and once a node has answered
 * `NOSCRIPT` (its script cache was flushed, by a restart most often), the scripts this client has
 * not run there since go as `EVAL` at once: a flushed node costs a client one extra request, not
 * one per script.
 */
import { describe, expect, it } from "vitest";
import { Redlock } from "../../../../src/index.js";
import { fakeClock, fakeNodes } from "../../support/fake-node.js";
import { run, useFakeTime } from "../../support/fake-time.js";

useFakeTime();

const commands = (log: readonly (readonly unknown[])[]) => log.map((c) => c[0]);

describe("scripts on a node whose script cache was flushed", () => {
  it("the first script pays the NOSCRIPT round trip; the others of this client go as EVAL at once, then EVALSHA again", async () => {
    const nodes = fakeNodes(3);
    const redlock = new Redlock({ nodes, clock: fakeClock });
    // A warm node: EVALSHA only (the client's cluster check, first, goes by EVAL always).
    await run((await run(redlock.acquire(["a", "b"], 10_000), 1)).release(), 1);
    for (const n of nodes) expect(commands(n.log)).toEqual(["EVAL", "EVALSHA", "EVALSHA"]);
    // The nodes restart: every script is gone from their caches.
    for (const n of nodes) {
      n.scriptCache.clear();
      n.log.length = 0;
    }
    const lock = await run(redlock.acquire(["a", "b"], 10_000), 1);
    // The acquire script: EVALSHA, NOSCRIPT, EVAL (both counted).
    for (const n of nodes) expect(commands(n.log)).toEqual(["EVALSHA", "EVAL"]);
    expect(lock.acquireReport.requests).toBe(6);
    // The release script has not run there since: EVAL at once, one request per node.
    const released = await run(lock.release(), 1);
    expect(released.report.requests).toBe(3);
    for (const n of nodes) expect(commands(n.log)).toEqual(["EVALSHA", "EVAL", "EVAL"]);
    // Both scripts are cached again: EVALSHA.
    await run((await run(redlock.acquire(["a", "b"], 10_000), 1)).release(), 1);
    for (const n of nodes) expect(commands(n.log).slice(3)).toEqual(["EVALSHA", "EVALSHA"]);
  });

  it("a node that loses its scripts again is asked by EVALSHA first, and falls back again", async () => {
    const nodes = fakeNodes(3);
    const redlock = new Redlock({ nodes, clock: fakeClock });
    // The client's cluster check, once (a script too).
    await run((await run(redlock.acquire(["a", "b"], 10_000), 1)).release(), 1);
    for (let restart = 0; restart < 2; restart++) {
      for (const n of nodes) {
        n.scriptCache.clear();
        n.log.length = 0;
      }
      const lock = await run(redlock.acquire(["a", "b"], 10_000), 1);
      await run(lock.release(), 1);
      for (const n of nodes) expect(commands(n.log), `restart ${restart}`).toEqual(["EVALSHA", "EVAL", "EVAL"]);
    }
  });

  it("two clients on other servers with the same node ids: what one learns of its nodes leaves the other's alone", async () => {
    const [first, second] = [fakeNodes(3), fakeNodes(3)] as const;
    const clients = [first, second].map((nodes) => new Redlock({ nodes, clock: fakeClock }));
    for (const redlock of clients) await run((await run(redlock.acquire(["a", "b"], 10_000), 1)).release(), 1);
    for (const n of [...first, ...second]) n.log.length = 0;
    for (const n of first) n.scriptCache.clear();
    // The first client meets NOSCRIPT on its acquisition; the second acquires and releases while
    // the first's memory holds only that script.
    const held = await run((clients[0] as Redlock).acquire(["a", "b"], 10_000), 1);
    await run((await run((clients[1] as Redlock).acquire(["a", "b"], 10_000), 1)).release(), 1);
    await run(held.release(), 1);
    for (const n of first) expect(commands(n.log)).toEqual(["EVALSHA", "EVAL", "EVAL"]);
    for (const n of second) expect(commands(n.log)).toEqual(["EVALSHA", "EVALSHA"]);
  });

  it("only the node that answered NOSCRIPT is asked by EVAL", async () => {
    const nodes = fakeNodes(3);
    const redlock = new Redlock({ nodes, clock: fakeClock });
    await run((await run(redlock.acquire(["a", "b"], 10_000), 1)).release(), 1);
    for (const n of nodes) n.log.length = 0;
    nodes[1]!.scriptCache.clear();
    await run((await run(redlock.acquire(["a", "b"], 10_000), 1)).release(), 1);
    expect(commands(nodes[0]!.log)).toEqual(["EVALSHA", "EVALSHA"]);
    expect(commands(nodes[1]!.log)).toEqual(["EVALSHA", "EVAL", "EVAL"]);
    expect(commands(nodes[2]!.log)).toEqual(["EVALSHA", "EVALSHA"]);
  });

  it("the cluster check goes by EVAL: on nodes whose cache is cold, a fresh client's first call sends one request per node for it", async () => {
    const nodes = fakeNodes(3);
    for (const n of nodes) n.scriptCache.clear();
    const redlock = new Redlock({ nodes, clock: fakeClock });
    const lock = await run(redlock.acquire("a", 10_000), 1);
    for (const n of nodes) {
      const checks = n.log.filter((c) => c !== undefined && n.lockLog.indexOf(c) < 0);
      expect(commands(checks)).toEqual(["EVAL"]);
    }
    await run(lock.release(), 1);
  });
});
