/**
 * The semaphore and the read-write lock against real nodes, each property checked against what
 * the nodes themselves hold as well as what the clients claimed:
 * - the issue's counterexample: k = 2, N = 3, three clients that each reach a different pair of
 *   nodes first (a per-client fetch delays the third), never three holders; negative control: the
 *   count-per-node design (a sorted set per node, admit where fewer than k) under the same
 *   schedule admits three, and the same check on the nodes' keys catches it;
 * - permits under contention: never more than k claimed windows at once, and k reached;
 * - read-write: a writer excludes readers and writers, readers share, a waiting writer stops new
 *   readers, reader entries expire by the node's clock (a reader past its TTL no longer holds back
 *   a writer, while its sorted set lives on); negative control: a read lock that ignores the
 *   writer is caught on the nodes;
 * - a failed attempt leaves no reader entry behind, also when its requests land after the cleanup.
 */
import { describe, expect, it } from "vitest";
import { type Lock, ReadWriteLock, Redlock, restNode, Semaphore } from "../../src/index.js";
import { primitiveKey } from "../../src/primitives/calls.js";
import { rwReadScript } from "../../src/primitives/scripts/rw-read.js";
import { lateFetch } from "../../tools/bench/parts/semaphore-pairs.js";
import {
  checkPermits,
  checkReadWrite,
  type ModeWindow,
  onQuorum,
  type ReadWriteNodeState,
  readWriteConflicts,
  type Window,
} from "../../tools/chaos/checkers/primitives.js";
import { type Endpoint, raw, uniqueKey } from "./support/nodes.js";
import { useOwnThreeNodes } from "./support/own-cluster.js";

const { endpoints } = useOwnThreeNodes();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A fetch whose read-lock requests reach the server `ms` late, whatever the client's signal says
 * (a request on its way cannot be recalled); `landed` gets one promise per such request.
 */
function readLandsLate(ms: number, landed: Promise<unknown>[]): typeof fetch {
  return (input, init) =>
    new Promise<Response>((resolve, reject) => {
      const isRead = typeof init?.body === "string" && init.body.includes(rwReadScript.sha1);
      if (!isRead) return void fetch(input, init).then(resolve, reject);
      landed.push(
        sleep(ms).then(() =>
          fetch(input, { ...init, signal: null }).then((response) => {
            resolve(response);
            return response.text();
          }, reject),
        ),
      );
      init?.signal?.addEventListener("abort", () => reject(init.signal?.reason), { once: true });
    });
}

/** Client `c`'s view of the three nodes: nodes c and c + 1 at once, node c + 2 `lateMs` later. */
function pairFirst(client: number, lateMs: number) {
  return endpoints.map((e, i) => (i === (client + 2) % 3 ? { ...e, fetch: lateFetch(lateMs) } : e));
}

/** Per node, the tokens in the slot keys of a semaphore (read with plain GETs). */
async function slotHolders(name: string, permits: number): Promise<Set<string>[]> {
  const keys = Array.from({ length: permits }, (_, i) => primitiveKey("", "semaphore", name, `${i}`));
  return Promise.all(
    endpoints.map(async (e) => {
      const values = await Promise.all(keys.map((k) => raw(e, "GET", k)));
      return new Set(values.filter((v): v is string => typeof v === "string"));
    }),
  );
}

const rwKey = (name: string, part: string) => primitiveKey("", "rw", name, part);

/** Per node: the writer, and the readers whose entries are live by the node's own clock. */
async function rwStates(name: string): Promise<ReadWriteNodeState[]> {
  return Promise.all(
    endpoints.map(async (e) => {
      const [seconds, micros] = (await raw(e, "TIME")) as [string, string];
      const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      const range = ((await raw(e, "ZRANGE", rwKey(name, "readers"), 0, -1, "WITHSCORES")) ?? []) as string[];
      const readers = new Set<string>();
      for (let i = 0; i + 1 < range.length; i += 2) if (Number(range[i + 1]) > now) readers.add(range[i] as string);
      const writer = (await raw(e, "GET", rwKey(name, "write"))) as string | null;
      return { writer: writer ?? undefined, readers };
    }),
  );
}

describe("the counterexample: k = 2, N = 3, three clients that each reach a different pair first", () => {
  it("never three holders, by the clients and by the nodes' own keys", async () => {
    let grants = 0;
    for (let round = 0; round < 12; round++) {
      const name = uniqueKey("pairs");
      const clients = [0, 1, 2].map(
        (c) => new Semaphore(new Redlock({ nodes: pairFirst(c, 150), requestTimeoutMs: 1000 }), name, 2),
      );
      const permits = (await Promise.all(clients.map((s) => s.tryAcquire(10_000)))).filter((p) => p !== null);
      // Every request has landed by now, the late ones included.
      await sleep(200);
      expect(permits.length).toBeLessThanOrEqual(2);
      const onNodes = onQuorum(await slotHolders(name, 2), 2);
      expect(onNodes.length).toBeLessThanOrEqual(2);
      expect(onNodes.sort()).toEqual(permits.map((p) => p.token).sort());
      grants += permits.length;
      await Promise.all(permits.map((p) => p.release()));
    }
    expect(grants).toBeGreaterThanOrEqual(12);
  });

  it("negative control: the count-per-node design under the same schedule admits three, caught on the nodes", async () => {
    const name = uniqueKey("counting");
    // As redis-semaphore's RedlockSemaphore does on each node: drop expired holders, admit below the limit.
    const admit = `redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[3])
if redis.call("ZCARD", KEYS[1]) < tonumber(ARGV[1]) then
redis.call("ZADD", KEYS[1], ARGV[3] + 10000, ARGV[2])
return 1
end
return 0`;
    const tokens = ["a", "b", "c"];
    const admitted = await Promise.all(
      [0, 1, 2].map(async (c) => {
        const answers = await Promise.all(
          pairFirst(c, 150).map((node) =>
            restNode(node).command(
              ["EVAL", admit, 1, name, 2, tokens[c] as string, Date.now()],
              AbortSignal.timeout(5000),
            ),
          ),
        );
        return answers.filter((a) => a === 1).length >= 2;
      }),
    );
    expect(admitted).toEqual([true, true, true]);
    const holders = await Promise.all(
      endpoints.map(async (e) => new Set((await raw(e, "ZRANGE", name, 0, -1)) as string[])),
    );
    expect(onQuorum(holders, 2).sort()).toEqual(["a", "b", "c"]);
  });
});

describe("permits under contention", () => {
  it("at most k claimed windows at once, k reached, every client served", async () => {
    const name = uniqueKey("contended");
    const windows: Window[] = [];
    const options = { retryBaseDelayMs: 10, retryMaxDelayMs: 40, maxAttempts: 1000, requestBudget: 10_000 };
    const client = async (c: number) => {
      const semaphore = new Semaphore(new Redlock({ nodes: endpoints }), name, 2);
      for (let i = 0; i < 4; i++) {
        await semaphore.using(
          3000,
          async (_signal, permit) => {
            const start = performance.now();
            const claimedEnd = start + permit.remainingMs();
            await sleep(15);
            windows.push({ holder: `${c}-${i}`, start, end: Math.min(performance.now(), claimedEnd) });
          },
          options,
        );
      }
    };
    await Promise.all([0, 1, 2, 3, 4].map(client));
    expect(windows).toHaveLength(20);
    const result = checkPermits(windows, 2);
    expect(result.anomaly).toBeUndefined();
    expect(result.mostAtOnce).toBe(2);
  });
});

describe("read-write on real nodes", () => {
  it("readers share; a writer excludes readers and writers; a waiting writer stops new readers", async () => {
    const name = uniqueKey("rw");
    const doc = () => new ReadWriteLock(new Redlock({ nodes: endpoints }), name);
    const readers = await Promise.all([doc().acquireRead(10_000), doc().acquireRead(10_000)]);
    expect(await doc().tryAcquireWrite(10_000)).toBeNull();
    const writing = doc().acquireWrite(10_000, { retryBaseDelayMs: 20, retryMaxDelayMs: 50, maxAttempts: 1000 });
    await sleep(100);
    // The writer waits: its mark stops a new reader, though only readers hold the lock.
    expect(await doc().tryAcquireRead(10_000)).toBeNull();
    expect(readWriteConflicts(await rwStates(name), 2)).toEqual([]);
    await Promise.all(readers.map((r) => r.release()));
    const writer = await writing;
    expect(await doc().tryAcquireRead(10_000)).toBeNull();
    expect(await doc().tryAcquireWrite(10_000)).toBeNull();
    const states = await rwStates(name);
    expect(
      onQuorum(
        states.map((s) => new Set(s.writer ? [s.writer] : [])),
        2,
      ),
    ).toEqual([writer.token]);
    expect(readWriteConflicts(states, 2)).toEqual([]);
    await writer.release();
    const reader = await doc().tryAcquireRead(10_000);
    expect(reader).not.toBeNull();
    await reader?.release();
  });

  it("under contention, reads and writes from many clients: no write window overlaps another window", async () => {
    const name = uniqueKey("rw-contended");
    const windows: ModeWindow[] = [];
    const options = { retryBaseDelayMs: 10, retryMaxDelayMs: 40, maxAttempts: 1000, requestBudget: 10_000 };
    const client = async (c: number) => {
      const doc = new ReadWriteLock(new Redlock({ nodes: endpoints }), name);
      for (let i = 0; i < 3; i++) {
        const mode = (c + i) % 3 === 0 ? "write" : "read";
        const routine = async (_signal: AbortSignal, lock: Lock) => {
          const start = performance.now();
          const claimedEnd = start + lock.remainingMs();
          await sleep(10);
          windows.push({ holder: `${c}-${i}`, mode, start, end: Math.min(performance.now(), claimedEnd) });
        };
        if (mode === "read") await doc.usingRead(3000, routine, options);
        else await doc.usingWrite(3000, routine, options);
      }
    };
    await Promise.all([0, 1, 2, 3, 4, 5].map(client));
    expect(windows).toHaveLength(18);
    expect(windows.filter((w) => w.mode === "write").length).toBe(6);
    expect(checkReadWrite(windows)).toEqual([]);
  });

  it("a reader past its TTL on the node's clock no longer holds back a writer, while its sorted set lives on", async () => {
    const name = uniqueKey("rw-expiry");
    const doc = () => new ReadWriteLock(new Redlock({ nodes: endpoints }), name);
    const short = await doc().acquireRead(400);
    const long = await doc().acquireRead(20_000);
    await sleep(600);
    expect((await short.verify()).held).toBe(false);
    for (const state of await rwStates(name)) expect([...state.readers]).toEqual([long.token]);
    expect(await doc().tryAcquireWrite(10_000)).toBeNull();
    await long.release();
    const writer = await doc().tryAcquireWrite(10_000);
    expect(writer).not.toBeNull();
    // The short reader's entry was dropped by the script, not by its set's TTL: the set had 20 s.
    for (const e of endpoints) expect(await raw(e, "EXISTS", rwKey(name, "readers"))).toBe(0);
    await writer?.release();
  });

  it("negative control: a read lock that ignores the writer is caught on the nodes", async () => {
    const name = uniqueKey("rw-ignorant");
    const writer = await new ReadWriteLock(new Redlock({ nodes: endpoints }), name).acquireWrite(10_000);
    for (const e of endpoints) await raw(e, "ZADD", rwKey(name, "readers"), Date.now() + 10_000, "ignorant");
    expect((await rwStates(name)).every((s) => s.writer === writer.token && s.readers.has("ignorant"))).toBe(true);
    expect(readWriteConflicts(await rwStates(name), 2).sort()).toEqual(["ignorant", writer.token].sort());
    await writer.release();
  });

  it("a failed read attempt leaves no entry behind, also when its request lands after the cleanup", async () => {
    const name = uniqueKey("rw-cleanup");
    // A writer holds nodes 1 and 2; node 0 gets the read 300 ms late, after the client gave up at
    // its 100 ms deadline and after the cleanup's first release (which travels at once).
    for (const e of endpoints.slice(1)) await raw(e, "SET", rwKey(name, "write"), "foreign", "PX", 10_000);
    const landed: Promise<unknown>[] = [];
    const nodes = endpoints.map((e, i) => (i === 0 ? { ...e, fetch: readLandsLate(300, landed) } : e));
    const redlock = new Redlock({ nodes, requestTimeoutMs: 100 });
    expect(await new ReadWriteLock(redlock, name).tryAcquireRead(5_000)).toBeNull();
    await redlock.settled();
    await Promise.allSettled(landed);
    expect(landed).toHaveLength(1);
    expect(await raw(endpoints[0] as Endpoint, "ZCARD", rwKey(name, "readers"))).toBe(0);
  });
});
