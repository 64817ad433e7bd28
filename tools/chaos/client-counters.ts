/**
 * The protected counters of checker 4, on the separate "resource" redis: what a holder reads under
 * the lock and writes back incremented, unfenced (plain GET/SET) and fenced (the store refuses a
 * fencing token older than the largest it has seen).
 * @module
 */
import type { Redis } from "ioredis";
import type { Lock } from "../../src/index.js";
import { codeOf, FENCED_ACCESS, fenceOf, type Unstamped, WRITE_UNFENCED } from "./client-support.js";
import { harnessNow } from "./clock.js";
import { tokenId } from "./history.js";

/** What a read found: the counters' values, when they could be read. */
export interface Read {
  readonly unfenced?: number;
  readonly fenced?: number;
}

/** Where the counters are, and where their events go. */
export interface Counters {
  readonly store: Redis;
  /** Exercise the fenced counter when the lock has a fencing token. */
  readonly fenced: boolean;
  readonly emit: (event: Unstamped) => void;
}

/** Reads the counters of `resource` (its first, for a lock of several). */
export async function readCounters(c: Counters, lock: Lock, resource: string): Promise<Read> {
  const lockId = tokenId(lock.token);
  const out: { unfenced?: number; fenced?: number } = {};
  try {
    out.unfenced = Number((await c.store.get(`counter:unfenced:${resource}`)) ?? 0);
    c.emit({
      t: harnessNow(),
      type: "ok",
      f: "read",
      resource,
      lock: lockId,
      variant: "unfenced",
      read: out.unfenced,
    });
  } catch (error) {
    c.emit({
      t: harnessNow(),
      type: "fail",
      f: "read",
      resource,
      lock: lockId,
      variant: "unfenced",
      error: codeOf(error),
    });
  }
  const fence = fenceOf(lock);
  if (c.fenced && fence !== undefined) {
    const reply = (await c.store.eval(
      FENCED_ACCESS,
      2,
      `counter:fenced:${resource}`,
      `fence:${resource}`,
      fence,
      "",
    )) as [number, number];
    const accepted = reply[0] === 1;
    if (accepted) out.fenced = reply[1];
    c.emit({
      t: harnessNow(),
      type: "ok",
      f: "read",
      resource,
      lock: lockId,
      variant: "fenced",
      accepted,
      read: reply[1],
    });
  }
  return out;
}

/** Writes `read + 1` to each counter of `resource` that was read. */
export async function writeCounters(c: Counters, lock: Lock, resource: string, read: Read): Promise<boolean> {
  if (read.unfenced === undefined) return false;
  const lockId = tokenId(lock.token);
  const value = read.unfenced + 1;
  const base = { resource, lock: lockId, variant: "unfenced" as const, read: read.unfenced, value };
  try {
    const prev = Number(await c.store.eval(WRITE_UNFENCED, 1, `counter:unfenced:${resource}`, value));
    c.emit({ t: harnessNow(), type: "ok", f: "write", ...base, prev });
  } catch (error) {
    c.emit({ t: harnessNow(), type: "fail", f: "write", ...base, error: codeOf(error) });
    return false;
  }
  const fence = fenceOf(lock);
  if (c.fenced && fence !== undefined && read.fenced !== undefined) {
    const next = String(read.fenced + 1);
    const keys = [`counter:fenced:${resource}`, `fence:${resource}`];
    const reply = (await c.store.eval(FENCED_ACCESS, 2, ...keys, fence, next)) as [number, number];
    const accepted = reply[0] === 1;
    c.emit({
      t: harnessNow(),
      type: "ok",
      f: "write",
      resource,
      lock: lockId,
      variant: "fenced",
      accepted,
      read: read.fenced,
      value: read.fenced + 1,
      ...(accepted ? { prev: reply[1] } : {}),
    });
  }
  return true;
}
