/**
 * Fixed schedules of the API misused as users misuse it, with a waiter in the releasing holder's
 * own process (so that the library's in-isolate hand-over, or a pass-on, is what moves the lock).
 * Each runs on the library as it is (a safe scenario: nothing may fire) and on a patched copy (a
 * negative control: C1 or C2 must fire on every run). Every schedule tries its hand-over in a few
 * rounds: the waiter stands ready to take the lock over most of the time, not at every instant.
 * @module
 */
import type { ClientProcess } from "./clients.js";
import { clientsOf, type DriverContext, note, open } from "./drivers.js";
import { sleep } from "./nemesis.js";
import type { Target } from "./protocol.js";

/** Rounds of a schedule: each gives the hand-over one more chance. */
const ROUNDS = 3;
/** How long the waiter waits before the release: long enough to have polled its gate once and stand first in line. */
const WAIT_BEFORE_RELEASE_MS = 250;

/** A worker of a client process. */
interface Seat {
  readonly client: ClientProcess;
  readonly worker: number;
}

/**
 * The releasing holder misuses its lock while a worker of its own process waits for it: an
 * extension with a fifth of the TTL is left in flight (its requests and the release's reach the
 * nodes 20–80 ms late, in any order), `release()` is called three times, and its token goes to
 * another process, which extends (to a fifth of the TTL) and releases by token with it. That
 * process then tries the lock. With one token per holder nothing of this touches the next holder;
 * when the next holder shares the releasing holder's token (a pass-on, or the shared-token build),
 * the late extension, the second release and the by-token calls cut or delete its keys.
 */
export async function handOverMisuse(ctx: DriverContext): Promise<void> {
  const [p, x] = clientsOf(ctx, 2) as [ClientProcess, ClientProcess];
  const resource = `${ctx.keyPrefix}hand-over`;
  const all = Array.from({ length: ctx.nodes }, (_, i) => i);
  const short = Math.round(ctx.ttlMs / 5);
  for (let round = 0; round < ROUNDS; round++) {
    const held = await p.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs, worker: 0 });
    if (!held.ok) continue;
    const waiting = p.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs, worker: 1 });
    await sleep(WAIT_BEFORE_RELEASE_MS);
    const heal = open(ctx, {
      kind: "latency",
      clients: [p.id],
      nodes: all,
      params: { ms: 20, jitterMs: 60, phase: "request" },
    });
    await p.perform({ op: "extend", ttlMs: short, inFlight: true, worker: 0 });
    await p.perform({ op: "release", repeat: 2, shareToken: true, worker: 0 });
    heal();
    const next = await waiting;
    note(ctx, "the waiter of the holder's process after the release", { ok: next.ok, round });
    const stale = ctx.lastToken(resource);
    if (stale) {
      await x.perform({ op: "by-token", f: "extend", stale, ttlMs: short });
      await x.perform({ op: "by-token", f: "release", stale });
    }
    const other = await x.perform({ op: "acquire", resource, ttlMs: ctx.ttlMs, once: true });
    note(ctx, "another process tried while the waiter holds the lock", { ok: other.ok, round });
    if (other.ok) await x.perform({ op: "release" });
    if (next.ok) {
      await p.perform({ op: "read", worker: 1 });
      await p.perform({ op: "write", worker: 1 });
      await p.perform({ op: "release", worker: 1 });
    }
  }
}

/**
 * A lock that the isolate's shared state mistakes for another: `holder` holds `held` (in another
 * process), `releaser` holds `released` in the waiter's process, and `waiter` waits for `held`.
 * The releaser's release must not hand its lock over to the waiter: the waiter may only get `held`
 * once the holder lets go, at the end. When the state mixes the two up, the release takes the
 * waiter's offer, and the waiter holds `held` while the holder still does.
 */
async function collide(
  ctx: DriverContext,
  c: { holder: Seat; held: Target; releaser: Seat; released: Target; waiter: Seat },
): Promise<void> {
  const holderGot = await c.holder.client.perform({
    op: "acquire",
    resource: c.held,
    ttlMs: 3 * ctx.ttlMs,
    worker: c.holder.worker,
  });
  note(ctx, "the holder acquired", { ok: holderGot.ok });
  if (!holderGot.ok) return;
  for (let round = 0; round < ROUNDS; round++) {
    const r = c.releaser;
    const got = await r.client.perform({ op: "acquire", resource: c.released, ttlMs: ctx.ttlMs, worker: r.worker });
    if (!got.ok) continue;
    const w = c.waiter;
    const waiting = w.client.perform({ op: "acquire", resource: c.held, ttlMs: ctx.ttlMs, worker: w.worker });
    await sleep(WAIT_BEFORE_RELEASE_MS);
    await r.client.perform({ op: "release", worker: r.worker });
    const next = await waiting;
    note(ctx, "the waiter after the other lock's release", { ok: next.ok, round });
    if (next.ok) {
      await w.client.perform({ op: "read", worker: w.worker });
      await w.client.perform({ op: "write", worker: w.worker });
      await w.client.perform({ op: "release", worker: w.worker });
      break;
    }
  }
  await c.holder.client.perform({ op: "release", worker: c.holder.worker });
}

/**
 * Two clusters with equal node ids in one process (workers 0 on the first, 1 on the second): the
 * other process's worker 1 holds the resource on the second cluster, worker 0 of the first process
 * holds the same resource on the first cluster and releases it while worker 1 waits for it on the
 * second.
 */
export function equalIdsCollision(ctx: DriverContext): Promise<void> {
  const [p, x] = clientsOf(ctx, 2) as [ClientProcess, ClientProcess];
  const resource = `${ctx.keyPrefix}shared-name`;
  return collide(ctx, {
    holder: { client: x, worker: 1 },
    held: resource,
    releaser: { client: p, worker: 0 },
    released: resource,
    waiter: { client: p, worker: 1 },
  });
}

/**
 * Names that collide when joined by "\n": another process holds `a\nb` (one resource); worker 0
 * holds `["a", "b"]` (two) and releases it while worker 1 of its process waits for `a\nb`.
 */
export function newlineNamesCollision(ctx: DriverContext): Promise<void> {
  const [p, x] = clientsOf(ctx, 2) as [ClientProcess, ClientProcess];
  const [a, b] = [`${ctx.keyPrefix}a`, `${ctx.keyPrefix}b`];
  return collide(ctx, {
    holder: { client: x, worker: 0 },
    held: `${a}\n${b}`,
    releaser: { client: p, worker: 0 },
    released: [a, b],
    waiter: { client: p, worker: 1 },
  });
}
