/**
 * `npm run demo`: local nodes + the demo worker in workerd, the nodes' preflight (`checkNodes`),
 * then 200 concurrent counter increments with the lock and 200 without, and a table of what
 * happened. Stops everything it started, and exits 0 only when every locked request succeeded and
 * the locked counter is exact.
 */
import { checkNodes, Redlock } from "../../src/index.js";
import { startDemoStack } from "./worker-dev.js";

const REQUESTS = Number(process.env.DEMO_REQUESTS ?? 200);
/** Requests in flight at once (each on its own connection), as a load generator would send them. */
const IN_FLIGHT = Number(process.env.DEMO_CONCURRENCY ?? 64);
/**
 * A request with no answer by then counts as failed (the whole locked run takes a few seconds): a
 * request that hangs shows as one, instead of holding the demo up for fetch's own 300 s.
 */
const REQUEST_TIMEOUT_MS = 60_000;

interface Run {
  statuses: number[];
  latencies: number[];
  attempts: number[];
  final: number;
}

const failures: string[] = [];

async function main(): Promise<number> {
  console.log("Starting 5 local Redis nodes and the demo worker (workerd)…");
  const stack = await startDemoStack();
  const stop = async () => {
    await stack.stop();
  };
  process.once("SIGINT", () => void stop().then(() => process.exit(130)));
  try {
    console.log(`Worker at ${stack.url} (worker host pid ${stack.workerPid}); nodes:`);
    for (const node of stack.cluster.nodes)
      console.log(`  ${node.url}  (redis-server pid ${node.pid}, port ${node.redisPort})`);
    // What checkNodes() says about these nodes, as a user would run it before relying on them
    // (2 s between the clock readings: conclusive even while the machine is busy starting up).
    const nodes = stack.cluster.nodes.map(({ url, token }) => ({ url, token }));
    const preflight = await checkNodes(new Redlock({ nodes }), { clockSpacingMs: 2000 });
    console.log("");
    for (const line of preflight.summary) console.log(line);
    const headers = { authorization: `Bearer ${stack.secret}` };
    const run = async (name: string, query: string): Promise<Run> => {
      await fetch(`${stack.url}/counter/${name}`, { method: "DELETE", headers });
      const results = await pool(REQUESTS, IN_FLIGHT, async () => {
        const started = performance.now();
        try {
          const response = await fetch(`${stack.url}/counter/${name}/increment${query}`, {
            method: "POST",
            headers,
            signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
          });
          const body = await response.text();
          if (response.status !== 200) failures.push(`${response.status} ${body}`);
          return {
            status: response.status,
            latency: performance.now() - started,
            attempts: Number(response.headers.get("x-lock-attempts") ?? 0),
          };
        } catch (error) {
          // A dropped connection is a failed request, counted and shown, not a crash of the demo.
          failures.push(describeFailure(error));
          return { status: 0, latency: performance.now() - started, attempts: 0 };
        }
      });
      const { value } = (await (await fetch(`${stack.url}/counter/${name}`, { headers })).json()) as { value: number };
      return {
        statuses: results.map((r) => r.status),
        latencies: results.map((r) => r.latency),
        attempts: results.map((r) => r.attempts),
        final: value,
      };
    };
    console.log(
      `\nFiring ${REQUESTS} increments with the lock (${IN_FLIGHT} in flight at once), then ${REQUESTS} without…\n`,
    );
    const locked = await run("demo-locked", "");
    const unsafe = await run("demo-unsafe", "?unsafe=1");
    printTable([
      ["with the lock", locked],
      ["without (?unsafe=1)", unsafe],
    ]);
    const ok = locked.statuses.filter((s) => s === 200).length;
    const meanAttempts = locked.attempts.reduce((a, b) => a + b, 0) / Math.max(1, ok);
    console.log(
      `\nLock handoffs: ${ok} (the counter's lock passed from request to request ${ok} times, ` +
        `${meanAttempts.toFixed(1)} acquire attempts per request on average).`,
    );
    // What an operator's dashboard would get: the worker's edge-redlock/otel metrics, as its
    // console exporter writes them (worker-example/telemetry.ts).
    const exported = await (await fetch(`${stack.url}/telemetry`, { headers })).text();
    console.log("\nedge-redlock/otel metrics of the worker (cumulative; its console exporter's lines):");
    for (const line of exported.trim().split("\n")) console.log(`  ${line.replace(/^otel metric /, "")}`);
    if (failures.length > 0) console.log(`\n${failures.length} request(s) failed; the first ones:`);
    for (const failure of failures.slice(0, 5)) console.log(`  ${failure}`);
    const allLockedOk = ok === REQUESTS;
    const exact = locked.final === REQUESTS;
    if (exact && allLockedOk) console.log("The locked counter is exact; the unlocked one lost updates.");
    else if (!exact) console.log(`The locked counter is NOT exact: ${locked.final}, expected ${REQUESTS}.`);
    else console.log(`${REQUESTS - ok} locked request(s) failed.`);
    return exact && allLockedOk ? 0 : 1;
  } finally {
    await stop();
    console.log("Stopped the worker and the nodes.");
  }
}

function printTable(rows: [string, Run][]): void {
  const header = ["", "requests", "200 OK", "final", "expected", "lost updates", "p50 ms", "p99 ms"];
  const lines = rows.map(([label, run]) => [
    label,
    String(run.statuses.length),
    String(run.statuses.filter((s) => s === 200).length),
    String(run.final),
    String(REQUESTS),
    String(REQUESTS - run.final),
    percentile(run.latencies, 0.5).toFixed(1),
    percentile(run.latencies, 0.99).toFixed(1),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] as string).length)));
  const format = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join("  ");
  console.log(format(header));
  for (const line of lines) console.log(format(line));
}

/** Run `count` jobs with at most `width` in flight. */
async function pool<T>(count: number, width: number, job: () => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      while (next < count) {
        next++;
        results.push(await job());
      }
    }),
  );
  return results;
}

function describeFailure(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? ` (cause: ${error.cause.message})` : "";
  return `${error.message}${cause}`;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? 0;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
