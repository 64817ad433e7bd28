/**
 * A command model of how users hold and misuse locks, run on in-memory nodes and fake time, with
 * checkers that read the nodes' own keys as the source of truth. For the unit tests only.
 *
 * Three clients: c0 and c1 share an isolate (the same node objects and clock, so the same hot
 * state: a release of one hands the lock over to a waiter of the other, or of itself), c2 is
 * another isolate (other node objects, another clock). Every message to a node is delayed on its
 * own, request and reply, so requests land and answers come back in any order; a request is
 * applied when it is delivered, even when the client gave up on it.
 *
 * What the actors do: hold a lock (`acquire`, `tryAcquire` or `using`), extend it (shorter or
 * longer, awaited or left in flight), and release it once, twice or three times (at once or
 * apart; in `using()`, its `finally` releases once more); or, from another client, release or
 * extend by token with the token of a lock released earlier in the run. The checkers are in
 * `claim-ledger.ts`. A run's delays, and the library's own jitter, follow from its seed.
 */
import fc from "fast-check";
import { vi } from "vitest";
import { type Lock, type RedisNode, type Redlock, RedlockError } from "../../../src/index.js";
import { CHECKERS, type Checker, type Claim, ClaimLedger } from "./claim-ledger.js";
import { FakeNode, type MessageDelay } from "./fake-node.js";

/** A release plan: how many times `release()` is called, at once or `gapMs` apart. */
export interface ReleasePlan {
  readonly times: 0 | 1 | 2 | 3;
  readonly together: boolean;
  readonly gapMs: number;
}

/** An extension by the holder; `inFlight`: not awaited, so it may still be on its way at release. */
export interface Extension {
  readonly afterMs: number;
  readonly ttlMs: number;
  readonly inFlight: boolean;
}

export interface Holder {
  readonly kind: "holder";
  readonly client: 0 | 1 | 2;
  readonly atMs: number;
  readonly resources: readonly string[];
  readonly ttlMs: number;
  /** `acquire`, one `tryAcquire`, or `using` (whose `finally` releases once more). */
  readonly how: "acquire" | "try" | "using";
  readonly extensions: readonly Extension[];
  readonly holdMs: number;
  readonly release: ReleasePlan;
}

/** `redlock.release|extend(resources, token)` from another client, with a released lock's token. */
export interface ByToken {
  readonly kind: "by-token";
  readonly client: 0 | 1 | 2;
  readonly op: "release" | "extend";
  /** After the `nth` lock of the run is released (counted from 0), `delayMs` later. */
  readonly nth: number;
  readonly delayMs: number;
  readonly ttlMs: number;
}

export type Actor = Holder | ByToken;

export interface Scenario {
  readonly nodeCount: 3 | 5;
  /** Seeds the message delays. */
  readonly seed: number;
  /** Every client's deadline per request (the messages' delays are mostly shorter). */
  readonly requestTimeoutMs: number;
  readonly delay: {
    readonly baseMs: number;
    readonly spreadMs: number;
    /** Share of messages held back by up to `lateMs` more. */
    readonly lateShare: number;
    readonly lateMs: number;
    /** Share of requests lost on the way. */
    readonly dropShare: number;
  };
  readonly actors: readonly Actor[];
}

/** Clients 0 and 1 share an isolate: most actors are there, where hand-overs happen. */
const client = fc.constantFrom<0 | 1 | 2>(0, 0, 1, 1, 2);
const ttl = fc.integer({ min: 400, max: 2500 });

const holder: fc.Arbitrary<Holder> = fc.record({
  kind: fc.constant("holder" as const),
  client,
  atMs: fc.integer({ min: 0, max: 800 }),
  resources: fc.constantFrom<readonly string[]>(["r"], ["r"], ["r"], ["r"], ["s"], ["r", "s"]),
  ttlMs: ttl,
  how: fc.constantFrom("acquire" as const, "acquire" as const, "try" as const, "using" as const),
  extensions: fc.array(
    fc.record({
      afterMs: fc.integer({ min: 0, max: 300 }),
      ttlMs: fc.integer({ min: 100, max: 4000 }),
      inFlight: fc.boolean(),
    }),
    { maxLength: 2 },
  ),
  holdMs: fc.integer({ min: 0, max: 600 }),
  release: fc.record({
    times: fc.constantFrom<0 | 1 | 2 | 3>(0, 1, 1, 2, 2, 3),
    together: fc.boolean(),
    gapMs: fc.integer({ min: 0, max: 150 }),
  }),
});

const byToken: fc.Arbitrary<ByToken> = fc.record({
  kind: fc.constant("by-token" as const),
  client,
  op: fc.constantFrom("release" as const, "extend" as const),
  nth: fc.integer({ min: 0, max: 5 }),
  delayMs: fc.integer({ min: 0, max: 200 }),
  ttlMs: fc.integer({ min: 50, max: 3000 }),
});

/** Scenarios of uses and misuses of the API (see the module's comment). */
export const uses: fc.Arbitrary<Scenario> = fc.record({
  nodeCount: fc.constantFrom<3 | 5>(3, 5),
  seed: fc.integer(),
  requestTimeoutMs: fc.integer({ min: 100, max: 250 }),
  delay: fc.record({
    baseMs: fc.integer({ min: 0, max: 15 }),
    spreadMs: fc.integer({ min: 0, max: 30 }),
    lateShare: fc.constantFrom(0, 0.05, 0.15),
    lateMs: fc.integer({ min: 50, max: 300 }),
    dropShare: fc.constantFrom(0, 0, 0.02),
  }),
  // The first actor acquires with patience, so that every run grants at least once.
  actors: fc
    .tuple(
      holder,
      fc.array(fc.oneof({ weight: 4, arbitrary: holder }, { weight: 2, arbitrary: byToken }), {
        minLength: 2,
        maxLength: 10,
      }),
    )
    .map(([first, rest]) => [
      { ...first, how: "acquire" as const, atMs: 0, ttlMs: Math.max(first.ttlMs, 1000) },
      ...rest,
    ]),
});

/** What a run did: the figures a test asserts minimums on, so that it cannot pass by doing nothing. */
export interface RunStats {
  grants: number;
  /** Grants that took the lock over from an earlier grant (see `ClaimLedger.handOns`). */
  handedOver: number;
  /** Locks released more than once, the lock having been handed over or passed on. */
  releasedAgainAfterHandOn: number;
  /** By-token operations sent with a released lock's token, from another client. */
  byToken: number;
  /** Locks released while an extension of theirs was still on its way. */
  extensionInFlightAtRelease: number;
}

/** How the nodes or the client are broken, for a negative control: its checker must then report the run. */
export type Defect = "del-ignores-token" | "pexpire-ignores-token" | "reused-token" | undefined;

/** A small seeded PRNG (mulberry32). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function delays(s: Scenario, random: () => number): () => MessageDelay {
  const { baseMs, spreadMs, lateShare, lateMs, dropShare } = s.delay;
  const one = () => baseMs + random() * spreadMs + (random() < lateShare ? random() * lateMs : 0);
  return () => ({ requestMs: one(), replyMs: one(), drop: random() < dropShare });
}

/** A fake node whose compare-and-DEL or compare-and-PEXPIRE skips the compare (see {@link Defect}). */
function brokenNode(id: string, defect: Defect): FakeNode {
  const node = new FakeNode(id);
  if (defect !== "del-ignores-token" && defect !== "pexpire-ignores-token") return node;
  type Scripts = { runScript(name: string, keys: string[], argv: string[]): unknown };
  const run = (node as unknown as Scripts).runScript.bind(node);
  (node as unknown as Scripts).runScript = (name, keys, argv) => {
    if (defect === "del-ignores-token" && name === "release") {
      return keys.filter((k) => node.get(k) !== undefined && node.store.delete(k)).length;
    }
    if (defect === "pexpire-ignores-token" && name === "extend") {
      if (keys.some((k) => node.get(k) === undefined)) return 0;
      for (const k of keys) (node.store.get(k) as { expiresAt: number }).expiresAt = Date.now() + Number(argv[1]);
      return 1;
    }
    return run(name, keys, argv);
  };
  return node;
}

/** `lock` as a client that reuses the previous grant's token would hand it out (see {@link Defect}). */
function withToken(lock: Lock, token: string): Lock {
  return new Proxy(lock, {
    get: (target, key) => {
      if (key === "token") return token;
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * `nodes` as one isolate sees them: objects of its own (another isolate's are others, so that
 * they share no hot state), which call `answered` as each reply settles.
 */
function watched(nodes: readonly FakeNode[], answered: () => void): RedisNode[] {
  return nodes.map((node) => ({
    id: node.id,
    command: (args, signal) => {
      const reply = node.command(args, signal);
      reply.then(answered, answered);
      return reply;
    },
  }));
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A refusal of the library is an outcome of the run; any other error is rethrown. */
function refusal(error: unknown): undefined {
  if (error instanceof RedlockError) return undefined;
  throw error;
}

type MakeClient = (config: ConstructorParameters<typeof Redlock>[0]) => Redlock;

/**
 * Run `s` to its end on fake time (the caller fakes the timers) with clients made by `make`, and
 * return the first violation any of `checkers` found (or `undefined`) with the run's figures.
 */
export async function runScenario(
  s: Scenario,
  make: MakeClient,
  checkers: readonly Checker[] = CHECKERS,
  defect: Defect = undefined,
): Promise<{ violation: string | undefined; stats: RunStats }> {
  // The library's own jitter follows the seed too, so that a run is repeatable (and shrinks).
  const jitter = prng(~s.seed);
  const mathRandom = vi.spyOn(Math, "random").mockImplementation(jitter);
  try {
    return await new Run(s, make, checkers, defect).run();
  } finally {
    mathRandom.mockRestore();
  }
}

class Run {
  readonly #s: Scenario;
  readonly #defect: Defect;
  readonly #nodes: FakeNode[];
  readonly #clients: Redlock[];
  readonly #ledger: ClaimLedger;
  readonly #stats: RunStats = {
    grants: 0,
    handedOver: 0,
    releasedAgainAfterHandOn: 0,
    byToken: 0,
    extensionInFlightAtRelease: 0,
  };
  /** Claims in the order of their first release call, and who waits for the next one. */
  readonly #released: Claim[] = [];
  readonly #onRelease: (() => void)[] = [];
  #holdersDone = false;
  #lastToken: string | undefined;

  constructor(s: Scenario, make: MakeClient, checkers: readonly Checker[], defect: Defect) {
    this.#s = s;
    this.#defect = defect;
    const random = prng(s.seed);
    this.#nodes = Array.from({ length: s.nodeCount }, (_, i) => brokenNode(`n${i}`, defect));
    this.#ledger = new ClaimLedger(this.#nodes, checkers);
    const check = () => this.#ledger.check();
    for (const node of this.#nodes) {
      node.latency = delays(s, random);
      node.onApplied = check;
    }
    // After a reply, once the client has taken it in.
    const answered = () => setTimeout(check, 0);
    const inA = watched(this.#nodes, answered);
    const { requestTimeoutMs } = s;
    const clockA = { now: () => Date.now() };
    this.#clients = [
      make({ nodes: inA, clock: clockA, requestTimeoutMs }),
      make({ nodes: inA, clock: clockA, requestTimeoutMs }),
      make({ nodes: watched(this.#nodes, answered), clock: { now: () => Date.now() }, requestTimeoutMs }),
    ];
  }

  async run(): Promise<{ violation: string | undefined; stats: RunStats }> {
    const holders = this.#s.actors.filter((a) => a.kind === "holder");
    const byToken = this.#s.actors.filter((a) => a.kind === "by-token");
    let done = false;
    const holding = Promise.all(holders.map((a) => this.#hold(a))).then(() => {
      this.#holdersDone = true;
      this.#wake();
    });
    const finish = () => {
      done = true;
    };
    void Promise.all([holding, ...byToken.map((a) => this.#byToken(a))]).then(finish, (error: unknown) => {
      this.#ledger.fail(`the model itself failed: ${String(error)}`);
      finish();
    });
    for (let t = 0; !done && t < 30_000; t += 20) await vi.advanceTimersByTimeAsync(20);
    // The last releases' stragglers, and every client's background cleanup.
    await vi.advanceTimersByTimeAsync(2_000);
    if (!done) this.#ledger.fail("the run did not end within 30 s of fake time");
    const { over, from } = this.#ledger.handOns();
    this.#stats.handedOver = over.size;
    this.#stats.releasedAgainAfterHandOn = [...from].filter((c) => c.releases > 1).length;
    return { violation: this.#ledger.violation, stats: this.#stats };
  }

  #wake(): void {
    for (const wake of this.#onRelease.splice(0)) wake();
  }

  #grant(lock: Lock, client: number): Claim {
    const reused = this.#lastToken;
    this.#lastToken = lock.token;
    const shown = this.#defect === "reused-token" && reused !== undefined ? withToken(lock, reused) : lock;
    this.#stats.grants++;
    return this.#ledger.grant(lock, client, shown);
  }

  async #release(claim: Claim): Promise<void> {
    claim.releases++;
    if (claim.releases === 1) {
      if (claim.pending.size > 0) this.#stats.extensionInFlightAtRelease++;
      this.#released.push(claim);
      this.#wake();
    }
    const left = Math.round(claim.lock.remainingMs());
    this.#ledger.note(`release ${this.#ledger.name(claim)} (call ${claim.releases}), ${left} ms left`);
    await claim.lock.release().catch(refusal);
    this.#ledger.check();
  }

  /** The holder's work once granted: its extensions, its hold, its release calls. */
  async #work(actor: Holder, claim: Claim): Promise<void> {
    for (const e of actor.extensions) {
      await sleep(e.afterMs);
      this.#ledger.note(`extend ${this.#ledger.name(claim)} to ${e.ttlMs}${e.inFlight ? ", left in flight" : ""}`);
      const extension = claim.lock.extend(e.ttlMs).catch(refusal);
      if (!e.inFlight) await extension;
    }
    await sleep(actor.holdMs);
    const { times, together, gapMs } = actor.release;
    if (together) await Promise.all(Array.from({ length: times }, () => this.#release(claim)));
    else
      for (let i = 0; i < times; i++) {
        if (i > 0) await sleep(gapMs);
        await this.#release(claim);
      }
  }

  async #hold(actor: Holder): Promise<void> {
    await sleep(actor.atMs);
    const redlock = this.#clients[actor.client] as Redlock;
    const options = { acquireTimeoutMs: 3000 };
    // A refusal (held, timed out, nodes too slow) is an outcome: a run may refuse a grant, never
    // overlap. Any other error is the model's, and fails the run.
    if (actor.how === "using") {
      // The routine releases as many times as the plan says, and using() once more.
      const routine = (_signal: AbortSignal, lock: Lock) => this.#work(actor, this.#grant(lock, actor.client));
      await redlock.using(actor.resources, actor.ttlMs, routine, options).catch(refusal);
      return;
    }
    const lock = await (actor.how === "try"
      ? redlock.tryAcquire(actor.resources, actor.ttlMs)
      : redlock.acquire(actor.resources, actor.ttlMs, options)
    ).catch(refusal);
    if (lock) await this.#work(actor, this.#grant(lock, actor.client));
  }

  /** By token, with the token of the `nth` lock released, from a client other than its holder's. */
  async #byToken(actor: ByToken): Promise<void> {
    while (this.#released.length <= actor.nth) {
      if (this.#holdersDone) return;
      await new Promise<void>((resolve) => this.#onRelease.push(resolve));
    }
    const target = this.#released[actor.nth] as Claim;
    await sleep(actor.delayMs);
    const by = actor.client === target.client ? (actor.client + 1) % 3 : actor.client;
    const redlock = this.#clients[by] as Redlock;
    const { resources, token } = target.lock;
    this.#stats.byToken++;
    this.#ledger.note(`${actor.op} by token of ${this.#ledger.name(target)} from c${by}`);
    const op =
      actor.op === "release" ? redlock.release(resources, token) : redlock.extend(resources, token, actor.ttlMs);
    await op.catch(refusal);
    this.#ledger.check();
  }
}
