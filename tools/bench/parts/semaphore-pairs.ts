/**
 * The counterexample to a count of holders per node (issue: k = 2, N = 3, three clients that each
 * reach a different pair of nodes first). Client c reaches nodes c and c + 1 at once and node
 * c + 2 `lateMs` later: through a `fetch` that holds its requests to that node back (REST), or
 * through TCP proxies of its own, one per node, the one in front of that node holding back every
 * chunk the client sends (TCP). Then each node sees two clients first: a design that admits
 * below k on a majority of nodes admits all three; k slots, each a mutex, admit at most two.
 */
import type { HostNode } from "../node-host-protocol.js";
import { sleep } from "../stats.js";
import { startTcpProxy, type TcpProxy } from "../tcp-proxy.js";
import { PermitHistory } from "./permit-history.js";
import {
  createSemaphoreClient,
  type NodeRoute,
  type Permit,
  type RequestCounter,
  type SemaphoreClient,
  type SemaphoreSubjectId,
} from "./semaphore-subjects.js";

/** The counterexample's permits and clients. */
export const PAIRS_PERMITS = 2;
const CLIENTS = 3;

/** What one subject did over every trial. */
export interface PairsOutcome {
  id: SemaphoreSubjectId;
  trials: number;
  /** Permits granted, over every trial (at most 2 per trial for a safe design). */
  grants: number;
  /** Trials in which more than k claimed windows were open at once. */
  excessTrials: number;
  /** The most claimed windows open at once, over every trial. */
  mostAtOnce: number;
}

/** A `fetch` whose requests leave `ms` late (an abort before then cancels them); the integration tests use it too. */
export function lateFetch(ms: number): typeof fetch {
  return (input, init) =>
    new Promise<Response>((resolve, reject) => {
      const timer = setTimeout(() => globalThis.fetch(input, init).then(resolve, reject), ms);
      init?.signal?.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          reject(init.signal?.reason);
        },
        { once: true },
      );
    });
}

/** The node client `c` reaches late. */
const lateNode = (c: number) => (c + 2) % CLIENTS;

/**
 * Runs `trials` trials per subject, interleaved: in each, the three clients try once at the same
 * moment on a fresh semaphore of 2 permits, and whoever is granted holds for `holdMs` (longer
 * than `lateMs`, so that every grant of a trial overlaps the others), then releases.
 */
export async function runPairs(
  nodes: readonly HostNode[],
  subjects: readonly SemaphoreSubjectId[],
  trials: number,
  lateMs: number,
  holdMs: number,
  tag: string,
): Promise<PairsOutcome[]> {
  const used = nodes.slice(0, CLIENTS);
  // Each client's own proxies, in front of the node host's proxies (no added delay there now).
  const proxies: TcpProxy[][] = await Promise.all(
    Array.from({ length: CLIENTS }, () => Promise.all(used.map((node) => startTcpProxy(node.tcpPort)))),
  );
  const clients = new Map<SemaphoreSubjectId, SemaphoreClient[]>();
  try {
    for (let c = 0; c < CLIENTS; c++) {
      proxies[c]?.[lateNode(c)]?.setDelay({ fixedMs: 0, jitterMs: 0, requestMs: lateMs });
    }
    const counter: RequestCounter = { sent: 0 };
    for (const id of subjects) {
      const made = await Promise.all(
        Array.from({ length: CLIENTS }, (_, c) => {
          const routes: NodeRoute[] = used.map((node, i) => ({
            url: node.url,
            token: node.token,
            ...(i === lateNode(c) ? { fetch: lateFetch(lateMs) } : {}),
            tcpPort: ((proxies[c] as TcpProxy[])[i] as TcpProxy).port,
          }));
          return createSemaphoreClient(id, routes, counter, { singleTry: true });
        }),
      );
      clients.set(id, made);
    }
    const outcomes = subjects.map((id) => ({ id, trials: 0, grants: 0, excessTrials: 0, mostAtOnce: 0 }));
    for (let trial = 0; trial < trials; trial++) {
      for (let s = 0; s < subjects.length; s++) {
        const index = (s + trial) % subjects.length;
        const outcome = outcomes[index] as PairsOutcome;
        const history = new PermitHistory();
        const name = `pairs:${tag}:${outcome.id}:${trial}`;
        const sources = (clients.get(outcome.id) as SemaphoreClient[]).map((client) =>
          client.semaphore(name, PAIRS_PERMITS),
        );
        await Promise.all(
          sources.map(async (source, c) => {
            const permit: Permit | null = await source.acquire();
            if (permit === null) return;
            const close = history.claim(`client ${c}`);
            outcome.grants++;
            await sleep(holdMs);
            close();
            await permit.release();
          }),
        );
        const check = history.check(PAIRS_PERMITS);
        outcome.trials++;
        outcome.mostAtOnce = Math.max(outcome.mostAtOnce, check.mostAtOnce);
        if (check.excess) outcome.excessTrials++;
        // Every late request has landed before the next trial starts.
        await sleep(lateMs + 50);
      }
    }
    return outcomes;
  } finally {
    for (const made of clients.values()) await Promise.all(made.map((client) => client.close()));
    await Promise.all(proxies.flat().map((proxy) => proxy.close()));
  }
}
