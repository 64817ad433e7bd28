/**
 * A worker for test/integration/handover-request.test.ts: requests of one isolate passing a lock
 * from one to the other. Every request to a node goes through one module-level `fetch`, which
 * records each command sent from the isolate (its arguments, tokens included: this is a test
 * worker), so that a test can tell whether a release carried the next holder's token, as a
 * hand-over does.
 *
 * `?client=`: `module` (one client for every request of the isolate), `request` (a client made
 * per request from `env`, sharing the isolate's hot state with the others: same URLs, tokens and
 * `fetch`), or `isolated` (a client per request with a `fetch` of its own, which shares nothing
 * with the others, as a client of another isolate would not).
 *
 * `?role=hold`: acquire, hold `holdMs`, release (`release=await`: answer once the release has
 * its quorum; `release=waitUntil`: hand the release to `ctx.waitUntil` and answer at once;
 * `release=unawaited`: neither, and answer at once: workerd then cancels the release's requests
 * with the rest of the request's I/O), and answer `{ token }`. `?role=wait`: acquire (waiting for the holder), hold `holdMs`, release, and
 * answer what the grant was and which commands of the isolate carried its token. `?role=make-promise` and
 * `?role=resolve-promise`: one request makes a promise and ends, the next resolves it: the
 * cross-request resolution workerd warns about, for the test's negative control.
 */
import { type Lock, Redlock, type RedlockConfig } from "../../../src/index.js";

interface Env {
  NODES: string;
}

interface Context {
  waitUntil(promise: Promise<unknown>): void;
}

/** The commands sent from this isolate, each as the JSON array of its arguments. */
const sent: string[][] = [];

const recordingFetch: typeof fetch = (input, init) => {
  if (typeof init?.body === "string") sent.push(JSON.parse(init.body) as string[]);
  return fetch(input, init);
};

let shared: Redlock | undefined;

function client(env: Env, kind: string): Redlock {
  const endpoints = JSON.parse(env.NODES) as { url: string; token: string }[];
  const config = (fetcher: typeof fetch): RedlockConfig => ({
    nodes: endpoints.map(({ url, token }) => ({ url, token, fetch: fetcher })),
  });
  if (kind === "module") {
    shared ??= new Redlock(config(recordingFetch));
    return shared;
  }
  if (kind === "request") return new Redlock(config(recordingFetch));
  return new Redlock(config((input, init) => recordingFetch(input, init)));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The grant as the waiter saw it: its report, and the commands of the isolate that carried its token. */
function grant(lock: Lock) {
  const { requests, votes, quorum, nodes } = lock.acquireReport;
  return {
    token: lock.token,
    report: { requests, votes, quorum, outcomes: nodes.map((n) => `${n.outcome}/${n.requests}`) },
    carriers: sent.filter((args) => args.includes(lock.token)),
  };
}

let madeInAnEndedRequest: ((value: string) => void) | undefined;

export default {
  async fetch(request: Request, env: Env, ctx: Context): Promise<Response> {
    const url = new URL(request.url);
    const param = (name: string, fallback: string) => url.searchParams.get(name) ?? fallback;
    const role = param("role", "hold");
    if (role === "make-promise") {
      const made = new Promise<string>((resolve) => (madeInAnEndedRequest = resolve));
      void made.then(() => undefined);
      return Response.json({ made: true });
    }
    if (role === "resolve-promise") {
      madeInAnEndedRequest?.("resolved");
      await sleep(50);
      return Response.json({ resolved: madeInAnEndedRequest !== undefined });
    }
    const resource = param("resource", "r");
    const ttlMs = Number(param("ttlMs", "5000"));
    const redlock = client(env, param("client", "module"));
    try {
      if (role === "hold") {
        const lock = await redlock.acquire(resource, ttlMs);
        await sleep(Number(param("holdMs", "0")));
        if (param("release", "await") === "unawaited") void lock.release();
        else if (param("release", "await") === "waitUntil") ctx.waitUntil(lock.release());
        else await lock.release();
        return Response.json({ token: lock.token });
      }
      const lock = await redlock.acquire(resource, ttlMs, { acquireTimeoutMs: 10_000 });
      const seen = grant(lock);
      await sleep(Number(param("holdMs", "0")));
      await lock.release();
      return Response.json(seen);
    } catch (error) {
      const { code, message } = error as { code?: string; message?: string };
      return Response.json({ code, message }, { status: 500 });
    }
  },
};
