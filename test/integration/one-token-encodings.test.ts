/**
 * Unambiguous encodings and a reserved namespace (issue 27, A), against real nodes: no resource
 * name reaches what the library keeps for another resource set (in the isolate or on the nodes),
 * nor any key the library writes for itself.
 */
import { describe, expect, it } from "vitest";
import { InvalidArgumentError, Lock, Redlock } from "../../src/index.js";
import type { Endpoint } from "./support/claims.js";
import { expectHeldAlone, foreignClient, sleep } from "./support/isolates.js";
import { raw, uniqueKey } from "./support/nodes.js";
import { useOwnCluster } from "./support/own-cluster.js";

const nodesOf = useOwnCluster();
const endpoints = (): Endpoint[] => nodesOf().nodes.map(({ url, token }) => ({ url, token }));

/** The reserved namespace of every key the library writes for itself. */
const RESERVED = "__edge-redlock__:";

/** Every key on every node whose name contains `label`, once per name. */
async function keysNamed(label: string): Promise<Set<string>> {
  const found = await Promise.all(endpoints().map((e) => raw(e, "KEYS", `*${label}*`)));
  return new Set(found.flat() as string[]);
}

/**
 * The keys whose names contain `label` that a line of waiters for `resources` makes the library
 * write on the nodes, while it waits and after: a holder in one isolate, a waiter in another (it
 * stands in line at the gate) until the holder lets go.
 */
async function contend(resources: string | string[], label: string): Promise<Set<string>> {
  const holder = await foreignClient(endpoints()).acquire(resources, 5000);
  const waiting = foreignClient(endpoints()).acquire(resources, 5000);
  await sleep(500);
  const written = await keysNamed(label);
  await holder.release();
  const next = await waiting;
  await next.release();
  for (const key of await keysNamed(label)) written.add(key);
  return written;
}

/**
 * A client holds the pair [a, b]; another client (another isolate) holds the single resource
 * `single(a, b)`, and a caller of the first client waits for it. The pair's release must grant
 * that caller nothing, leave the other client's lock alone, and leave the pair's keys free.
 */
async function releasePairBesideWaiter(label: string, single: (a: string, b: string) => string): Promise<void> {
  const prefix = uniqueKey(label);
  const [a, b] = [`${prefix}:a`, `${prefix}:b`];
  const name = single(a, b);
  const redlock = new Redlock({ nodes: endpoints() });
  const pair = await redlock.acquire([a, b], 10_000);
  const holderOfName = await foreignClient(endpoints()).acquire(name, 10_000);
  const waiting = redlock.acquire(name, 10_000, { acquireTimeoutMs: 3000 });
  waiting.catch(() => undefined);
  await sleep(600);
  await pair.release();
  const outcome = await waiting.then(
    (lock) => lock,
    (error: unknown) => error,
  );
  await sleep(200);
  const pairKeys = await Promise.all(endpoints().map((e) => raw(e, "MGET", a, b)));
  if (outcome instanceof Lock) await outcome.release();
  expect(outcome, `a lock on ${JSON.stringify(name)} while another client holds it`).not.toBeInstanceOf(Lock);
  await expectHeldAlone(endpoints(), holderOfName);
  expect(pairKeys.flat(), "the released pair's keys, on every node").toEqual(Array(10).fill(null));
  await holderOfName.release();
}

describe("A: a list of resources and a single name never share state", () => {
  it('releasing the pair [a, b] grants nothing to a waiter of the single resource "a\\nb" in the same isolate', async () => {
    await releasePairBesideWaiter("a-newline", (a, b) => `${a}\n${b}`);
  });

  it('releasing the pair [a, b] grants nothing to a waiter of the single resource \'["a","b"]\' in the same isolate', async () => {
    await releasePairBesideWaiter("a-json-waiter", (a, b) => JSON.stringify([a, b]));
  });

  it('a resource literally named ["a","b"] and the pair [a, b] share no key on the nodes', async () => {
    const label = uniqueKey("a-json-name");
    const pair = [`${label}:a`, `${label}:b`];
    const named = JSON.stringify(pair);
    const ofNamed = await contend(named, label);
    // Start the pair from clean nodes: what it writes must be none of the names the other wrote.
    await Promise.all(endpoints().map((e) => raw(e, "DEL", ...ofNamed)));
    const ofPair = await contend(pair, label);
    expect(ofNamed.size, "the named resource's line left keys to compare").toBeGreaterThan(1);
    expect(ofPair.size, "the pair's line left keys to compare").toBeGreaterThan(2);
    expect([...ofPair].filter((key) => ofNamed.has(key))).toEqual([]);
  });
});

describe("A: the reserved namespace", () => {
  it(`every key the library writes for a line of waiters is under ${RESERVED} or is the lock's own`, async () => {
    const key = uniqueKey("a-namespace");
    const holder = await foreignClient(endpoints()).acquire(key, 5000);
    const waiting = foreignClient(endpoints()).acquire(key, 5000);
    await sleep(500);
    const written = [...(await keysNamed(key))];
    // A resource named like the gate's keys of 05aee0f: an ordinary name, free to lock.
    const gateLike = await foreignClient(endpoints()).tryAcquire(`edge-redlock:gate:${key}:queue`, 2000);
    await holder.release();
    await (await waiting).release();
    await gateLike?.release();
    expect(written.filter((k) => k !== key && !k.startsWith(RESERVED))).toEqual([]);
    expect(gateLike, "a lock on a resource nobody holds").toBeInstanceOf(Lock);
  });

  it(`a resource named ${RESERVED}… is refused (INVALID_ARGUMENT)`, async () => {
    const redlock = new Redlock({ nodes: endpoints() });
    await expect(redlock.acquire(`${RESERVED}gate:x`, 1000)).rejects.toThrow(InvalidArgumentError);
  });

  it(`keyPrefix + resource starting with ${RESERVED} is refused by acquire, tryAcquire and using (INVALID_ARGUMENT)`, async () => {
    for (const [keyPrefix, resource] of [
      ["__edge-", "redlock__:gate:x"],
      [RESERVED, "x"],
      ["__edge-redlock__", ":fence:x"],
    ] as const) {
      const redlock = new Redlock({ nodes: endpoints(), keyPrefix });
      const calls: Record<string, () => Promise<unknown>> = {
        acquire: () => redlock.acquire(resource, 1000),
        tryAcquire: () => redlock.tryAcquire(resource, 1000),
        using: () => redlock.using(resource, 1000, async () => "ran"),
        "acquire of a list": () => redlock.acquire(["ordinary", resource], 1000),
      };
      for (const [name, call] of Object.entries(calls)) {
        const outcome: unknown = await Promise.resolve()
          .then(call)
          .then(
            (value) => value,
            (error: unknown) => error,
          );
        if (outcome instanceof Lock) await outcome.release();
        const what = `${name}(${JSON.stringify(resource)}) with keyPrefix ${JSON.stringify(keyPrefix)}`;
        expect(outcome, what).toBeInstanceOf(InvalidArgumentError);
        expect((outcome as InvalidArgumentError).code, what).toBe("INVALID_ARGUMENT");
      }
    }
  });
});
