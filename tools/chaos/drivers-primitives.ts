/**
 * Fixed schedules of the semaphore and read-write lock scenarios (see `scenarios-primitives.ts`).
 * @module
 */
import type { ClientProcess } from "./clients.js";
import { clientsOf, type DriverContext, note, open } from "./drivers.js";
import { sleep } from "./nemesis.js";

/**
 * The counterexample, on N = 3 nodes with a semaphore of 2 permits: client c reaches
 * nodes c and c + 1 at once and node c + 2 late (its requests there are held 300 ms), and the three
 * take a permit at once, round after round. A count per node admits all three (each node admits
 * the two that came first); slots admit at most two.
 */
export async function pairsFirst(ctx: DriverContext): Promise<void> {
  if (ctx.nodes !== 3) throw new Error("the pairs schedule needs 3 nodes");
  const clients = clientsOf(ctx, 3);
  const heal = clients.map((c, i) =>
    open(ctx, {
      kind: "latency",
      clients: [c.id],
      nodes: [(i + 2) % 3],
      params: { ms: 300, jitterMs: 0, phase: "request" },
    }),
  );
  for (let round = 0; round < 4; round++) {
    const resource = `${ctx.keyPrefix}pairs-${round}`;
    const got = await Promise.all(
      clients.map((c) => c.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs, once: true })),
    );
    note(ctx, "three clients took a permit at once", { round, granted: got.filter((g) => g.ok).length });
    // Hold on: every late request has landed, and the grants' windows overlap.
    await sleep(400);
    await Promise.all(clients.map((c, i) => (got[i]?.ok ? c.perform({ op: "release" }) : undefined)));
  }
  for (const h of heal) h();
}

/** A writer holds the lock; a reader takes it too (refused, unless its read lock ignores the writer). */
export async function readerBesideWriter(ctx: DriverContext): Promise<void> {
  const [writer, reader] = clientsOf(ctx, 2) as [ClientProcess, ClientProcess];
  for (let round = 0; round < 2; round++) {
    const resource = `${ctx.keyPrefix}rw-${round}`;
    const wrote = await writer.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs, once: true, mode: "write" });
    if (!wrote.ok) continue;
    const read = await reader.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs, once: true, mode: "read" });
    note(ctx, "a reader tried beside the writer", { round, granted: read.ok });
    await sleep(100);
    if (read.ok) await reader.perform({ op: "release" });
    await writer.perform({ op: "release" });
  }
}
