/**
 * The checkers of the claim model (see `claim-model.ts`), for the unit tests only. A ledger of
 * every Lock granted in a run, checked against the in-memory nodes' own keys:
 * - overlap: at no instant do two Locks claim a shared resource. A Lock claims while
 *   `assertHeld(0)` passes: not released, not lost, validity left;
 * - backing: a claim is backed by a quorum of nodes whose keys hold the Lock's token and expire
 *   no sooner than the claim, or than what an extension of its own still on its way may set them
 *   to (the Lock learns of that extension's outcome when its answers are back);
 * - token: no two grants carry the same token (one token per holder).
 *
 * Checks run at every grant, as each node applies a command, and as each reply has been taken in
 * by the client. A claim changes only at a grant, at a release or extension call, or as the client
 * takes in an answer or a timer of its own fires (which only ever shortens it), and the keys only
 * as a node applies a command (their expiry is fixed then): so no violation goes unseen between
 * two checks. (A run sampled every millisecond of fake time as well found the same violations.)
 */
import type { Lock } from "../../../src/index.js";
import type { FakeNode } from "./fake-node.js";

export type Checker = "overlap" | "backing" | "token";
export const CHECKERS: readonly Checker[] = ["overlap", "backing", "token"];

/** One grant: the Lock, the client it came from, and what is known of its operations. */
export interface Claim {
  readonly lock: Lock;
  readonly client: number;
  /** Extensions called and not settled: when each was called, and its TTL. */
  readonly pending: Set<{ readonly sentAt: number; readonly ttlMs: number }>;
  /** `release()` calls so far. */
  releases: number;
}

function claiming(lock: Lock): boolean {
  try {
    lock.assertHeld(0);
    return true;
  } catch {
    return false;
  }
}

export class ClaimLedger {
  readonly claims: Claim[] = [];
  /** The first violation found, with the run's last events. */
  violation: string | undefined;
  readonly #nodes: readonly FakeNode[];
  readonly #checkers: readonly Checker[];
  readonly #history: string[] = [];
  readonly #t0 = Date.now();

  constructor(nodes: readonly FakeNode[], checkers: readonly Checker[]) {
    this.#nodes = nodes;
    this.#checkers = checkers;
  }

  /** Record an event of the run, for the report of a violation. */
  note(what: string): void {
    this.#history.push(`+${Date.now() - this.#t0} ${what}`);
  }

  name(claim: Claim): string {
    return `#${this.claims.indexOf(claim)}(c${claim.client} ${claim.lock.resources.join("+")})`;
  }

  /** Record a violation (the first one is kept). */
  fail(what: string): void {
    this.violation ??= `${what} (at +${Date.now() - this.#t0} ms)\n  ${this.#history.slice(-25).join("\n  ")}`;
  }

  /**
   * `lock` was just granted to `client` (`shown`: the Lock as the caller got it, when it is not
   * `lock` itself). Its extensions, the caller's or `using()`'s, are tracked from here on.
   */
  grant(lock: Lock, client: number, shown: Lock = lock): Claim {
    const claim: Claim = { lock: shown, client, pending: new Set(), releases: 0 };
    const extend = lock.extend.bind(lock);
    lock.extend = (ttlMs, overrides) => {
      const pending = { sentAt: Date.now(), ttlMs: ttlMs ?? lock.ttlMs };
      claim.pending.add(pending);
      const extension = extend(ttlMs, overrides);
      const settled = () => {
        claim.pending.delete(pending);
        this.check();
      };
      extension.then(settled, settled);
      return extension;
    };
    this.claims.push(claim);
    this.note(`grant ${this.name(claim)}`);
    this.check(claim);
    return claim;
  }

  /** Run every checker now; `granted`: the claim granted at this instant, if one was. */
  check(granted?: Claim): void {
    const live = this.claims.filter((c) => claiming(c.lock));
    if (this.#checkers.includes("overlap")) {
      for (const [i, a] of live.entries())
        for (const b of live.slice(i + 1))
          if (a.lock.resources.some((r) => b.lock.resources.includes(r)))
            this.fail(`overlap: ${this.name(a)} and ${this.name(b)} both claim`);
    }
    if (this.#checkers.includes("backing")) for (const claim of live) this.#checkBacking(claim);
    if (granted && this.#checkers.includes("token")) {
      const earlier = this.claims.find((c) => c !== granted && c.lock.token === granted.lock.token);
      if (earlier) this.fail(`token: ${this.name(granted)} has the token of ${this.name(earlier)}`);
    }
  }

  #checkBacking(claim: Claim): void {
    const { lock } = claim;
    let needed = Date.now() + lock.remainingMs();
    for (const p of claim.pending) needed = Math.min(needed, p.sentAt + p.ttlMs);
    const backing = this.#nodes.filter((node) =>
      lock.keys.every((key) => {
        const entry = node.store.get(key);
        return entry !== undefined && entry.value === lock.token && entry.expiresAt >= needed;
      }),
    );
    if (backing.length >= lock.options.quorum) return;
    const keys = this.#nodes.map((node) =>
      lock.keys
        .map((key) => {
          const entry = node.store.get(key);
          if (entry === undefined) return "-";
          const whose = this.claims.findIndex((c) => c.lock.token === entry.value);
          return `${whose < 0 ? "other" : `#${whose}`} until +${entry.expiresAt - this.#t0}`;
        })
        .join(" & "),
    );
    this.fail(`backing: ${this.name(claim)} claims until +${needed - this.#t0}; the nodes hold ${keys.join(", ")}`);
  }

  /**
   * The grants that took a lock over from an earlier one: handed over (a request to a node carried
   * both tokens, as a release that sets the next holder's keys does) or passed on (the same token).
   * `from`: the earlier grants of those pairs.
   */
  handOns(): { over: Set<Claim>; from: Set<Claim> } {
    const first = new Map<string, Claim>();
    for (const c of this.claims) if (!first.has(c.lock.token)) first.set(c.lock.token, c);
    const over = new Set<Claim>();
    const from = new Set<Claim>();
    const order = (c: Claim) => this.claims.indexOf(c);
    for (const node of this.#nodes)
      for (const args of node.log) {
        const carried = [...new Set(args.map((a) => first.get(String(a))).filter((c) => c !== undefined))];
        if (carried.length < 2) continue;
        carried.sort((a, b) => order(a) - order(b));
        from.add(carried[0] as Claim);
        for (const c of carried.slice(1)) over.add(c);
      }
    for (const c of this.claims) {
      const earlier = first.get(c.lock.token) as Claim;
      if (earlier === c) continue;
      over.add(c);
      from.add(earlier);
    }
    return { over, from };
  }
}
