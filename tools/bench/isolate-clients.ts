/**
 * One isolate of the isolates parts, inside its client process: its own latency to every node,
 * its one client of the system under test, and its callers looping acquire → critical section →
 * release on the hot key.
 *
 * Latency is added here, on the client side, so that every process has its own: the process's
 * `fetch` holds each request back by half its round trip before sending it and the answer by the
 * other half, so a command runs at a node when it would have arrived; TCP peers go through one
 * delaying proxy per node in this process, with the same two halves. Requests are counted here
 * too: every request to a lock node through this `fetch` or through ioredis, attributed to the
 * acquire() or release() call whose async context sent it (AsyncLocalStorage), as a Workers
 * invocation is charged for the subrequests it makes.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { Redis } from "ioredis";
import type { CallerFigures, IsolateConfig, IsolateFigures } from "./isolate-protocol.js";
import { describeReply, describeRequest, traceRecorder } from "./isolate-trace.js";
import { restPipeline } from "./raw.js";
import { sleep } from "./stats.js";
import { createClient, type LockClient, SYSTEMS } from "./systems.js";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.js";

/** One acquire() call: the requests it sent so far (its release included), and whether it ended. */
interface CallRecord {
  requests: number;
  done: boolean;
  /** The caller's index in its isolate, for the trace. */
  caller: number;
}

/** What the callers of one process count together. */
interface SharedCounts {
  sections: number;
  overlaps: number;
  gaveUp: number;
  errors: number;
  firstError: string | undefined;
}

/** The async context of one part of a call (its acquire, or its release); closed when that part returned. */
interface CallPart {
  call: CallRecord;
  open: boolean;
}

const callContext = new AsyncLocalStorage<CallPart>();

/** This process's trace, with `ISOLATE_TRACE=<dir>` (see ./isolate-trace.ts); set up by prepareIsolate. */
let tracer: ReturnType<typeof traceRecorder>;

/** Requests to the lock nodes, counted while the window is open. */
const tally = { window: false, windowRequests: 0, outsideRequests: 0 };

/** Counts one request to a lock node against the call that sent it (or as outside any call). */
function countRequest(): void {
  const part = callContext.getStore();
  const open = part?.open === true;
  if (open) part.call.requests++;
  if (tally.window) {
    tally.windowRequests++;
    if (!open) tally.outsideRequests++;
  }
}

/** Waits `ms`, or rejects with the signal's reason once it aborts (a timed-out request stays timed out). */
function pause(ms: number, signal: AbortSignal | null | undefined): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

const NULL_BODY_STATUS = new Set([101, 204, 205, 304]);

/**
 * This process's `fetch`: half the round trip of the target's origin before sending, the other
 * half after the whole answer arrived; requests to lock nodes counted.
 */
function delayingFetch(real: typeof fetch, rttByOrigin: Map<string, number>, lockOrigins: Set<string>): typeof fetch {
  return async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const origin = new URL(url).origin;
    const half = (rttByOrigin.get(origin) ?? 0) / 2;
    const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined);
    if (lockOrigins.has(origin)) countRequest();
    const traced = tracer && lockOrigins.has(origin) ? describeRequest(url, init?.body) : undefined;
    // The caller whose call sent it (none for a request outside any call).
    const caller = callContext.getStore()?.call.caller;
    if (traced) tracer?.record("send", traced, caller);
    await pause(half, signal);
    const response = await real(input, init);
    const body = await response.arrayBuffer();
    await pause(half, signal);
    if (traced) {
      const reply = describeReply(traced, new TextDecoder().decode(body));
      tracer?.record("recv", reply === undefined ? traced : `${traced} ${reply}`, caller);
    }
    return new Response(NULL_BODY_STATUS.has(response.status) ? null : body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/** Counts every command ioredis sends (once each: a command may pass sendCommand again from the offline queue). */
function countIoredisCommands(): void {
  const proto = Redis.prototype as unknown as { sendCommand: (command: object, ...rest: unknown[]) => unknown };
  const send = proto.sendCommand;
  const seen = new WeakSet<object>();
  proto.sendCommand = function (this: unknown, command: object, ...rest: unknown[]) {
    if (!seen.has(command)) {
      seen.add(command);
      countRequest();
    }
    return send.call(this, command, ...rest);
  };
}

/** Installs this process's latency: its `fetch`, and for TCP systems its delaying proxies (one per lock node). */
async function installLatency(config: IsolateConfig): Promise<TcpProxy[]> {
  const rttByOrigin = new Map<string, number>();
  const lockOrigins = new Set<string>();
  config.nodes.forEach((node, i) => {
    const origin = new URL(node.url).origin;
    rttByOrigin.set(origin, config.placement.nodeRttMs[i] ?? 0);
    lockOrigins.add(origin);
  });
  rttByOrigin.set(new URL(config.data.url).origin, config.placement.dataRttMs);
  globalThis.fetch = delayingFetch(globalThis.fetch.bind(globalThis), rttByOrigin, lockOrigins);
  countIoredisCommands();
  if (SYSTEMS[config.spec.id].transport !== "TCP") return [];
  return Promise.all(
    config.nodes.slice(0, config.spec.n).map(async (node, i) => {
      const proxy = await startTcpProxy(node.redisPort);
      const half = (config.placement.nodeRttMs[i] ?? 0) / 2;
      proxy.setDelay({ fixedMs: half, jitterMs: 0, requestMs: half });
      return proxy;
    }),
  );
}

/** A prepared isolate, ready to run its callers. */
export interface PreparedIsolate {
  /**
   * Starts the callers at `startAt` (epoch ms). They start acquire() calls until `startAt +
   * windowMs`; `done` resolves once every caller's last call ended. `figures()` reads the
   * figures so far.
   */
  start(startAt: number, windowMs: number): { figures: () => IsolateFigures; done: Promise<void> };
}

/**
 * Installs the latency, creates the process's one client and warms it up (connections, script
 * caches, the library's first contact with the nodes, JIT) with an acquire + release of a key of
 * its own and one round trip to the data node: the window measures a running isolate.
 */
export async function prepareIsolate(config: IsolateConfig): Promise<PreparedIsolate> {
  tracer = traceRecorder(process.env.ISOLATE_TRACE, `${config.spec.id}-${config.spec.policy}`);
  const proxies = await installLatency(config);
  const nodes = config.nodes.map((node, i) => ({ ...node, tcpPort: proxies[i]?.port ?? node.tcpPort }));
  const client = await createClient(config.spec, { kind: "servers", nodes });
  const warm = await client.acquire(`${config.key}:warm:${process.pid}`, config.ttlMs);
  if (warm !== null) await client.release(warm);
  await restPipeline(config.data, [["GET", `${config.key}:warm`]]);
  return {
    start(startAt, windowMs) {
      const end = startAt + windowMs;
      const records: CallRecord[] = [];
      const shared: SharedCounts = { sections: 0, overlaps: 0, gaveUp: 0, errors: 0, firstError: undefined };
      const callers: CallerFigures[] = Array.from({ length: config.callers }, () => ({
        handoffs: 0,
        sequence: [],
        waits: [],
      }));
      // The give-ups inside the window, by reason: the client's counts at its end less those at its
      // start (read where the window opens and closes, as the request tally is).
      let giveUpsBefore: Record<string, number> = {};
      const gaveUpFor: Record<string, number> = {};
      setTimeout(
        () => {
          tally.window = true;
          giveUpsBefore = client.giveUps?.() ?? {};
        },
        Math.max(0, startAt - Date.now()),
      );
      setTimeout(
        () => {
          tally.window = false;
          for (const [code, n] of Object.entries(client.giveUps?.() ?? {})) {
            const inWindow = n - (giveUpsBefore[code] ?? 0);
            if (inWindow > 0) gaveUpFor[code] = inWindow;
          }
        },
        Math.max(0, end - Date.now()),
      );
      const loops = callers.map((figures, caller) =>
        callerLoop(client, config, startAt, end, { caller, figures }, records, shared),
      );
      return {
        figures: () => ({
          callers: structuredClone(callers),
          calls: records.map((r) => r.requests),
          cut: records.filter((r) => !r.done).length,
          windowRequests: tally.windowRequests,
          outsideRequests: tally.outsideRequests,
          sections: shared.sections,
          overlaps: shared.overlaps,
          gaveUp: shared.gaveUp,
          gaveUpFor: { ...gaveUpFor },
          errors: shared.errors,
          ...(shared.firstError === undefined ? {} : { firstError: shared.firstError }),
        }),
        done: Promise.all(loops).then(() => undefined),
      };
    },
  };
}

/** Runs `part` of `call` in its own async context; the context closes when it returns. */
async function inCall<T>(call: CallRecord, work: () => Promise<T>): Promise<T> {
  const part: CallPart = { call, open: true };
  try {
    return await callContext.run(part, work);
  } finally {
    part.open = false;
  }
}

/**
 * One caller: until the window ends, wants the lock (calling acquire() again after each give-up),
 * runs the critical section, releases. The section is two round trips to the data node:
 * `INCR holders` + `GET counter`, then `SET counter+1` + `DECR holders`; holders > 1 is an
 * overlapping hold, and a final counter below the sections counted is a lost update.
 */
async function callerLoop(
  client: LockClient,
  config: IsolateConfig,
  startAt: number,
  end: number,
  { caller, figures }: { caller: number; figures: CallerFigures },
  records: CallRecord[],
  shared: SharedCounts,
): Promise<void> {
  const fail = (error: unknown) => {
    shared.errors++;
    shared.firstError ??= (error as Error).message;
  };
  await sleep(Math.max(0, startAt - Date.now()));
  // A caller that never gets the lock must weigh in the waits too: the wait still open when the window ends counts.
  let wanting: number | undefined;
  const atEnd = setTimeout(
    () => {
      if (wanting !== undefined) figures.openWait = performance.now() - wanting;
    },
    Math.max(0, end - Date.now()),
  );
  while (Date.now() < end) {
    const wantSince = performance.now();
    wanting = wantSince;
    let handle: unknown = null;
    let call: CallRecord | undefined;
    while (handle === null && Date.now() < end) {
      call = { requests: 0, done: false, caller };
      records.push(call);
      try {
        handle = await inCall(call, () => client.acquire(config.key, config.ttlMs));
        if (handle === null) {
          call.done = true;
          tracer?.record("gave-up", undefined, caller);
          if (Date.now() < end) shared.gaveUp++;
        }
      } catch (error) {
        call.done = true;
        fail(error);
        await sleep(10);
      }
    }
    if (handle === null || call === undefined) break;
    wanting = undefined;
    tracer?.record("granted", undefined, caller);
    const waited = performance.now() - wantSince;
    try {
      const [holders, value] = await restPipeline(config.data, [
        ["INCR", config.holdersKey],
        ["GET", config.counterKey],
      ]);
      if (holders !== 1) shared.overlaps++;
      figures.sequence.push(Number(value ?? 0));
      await restPipeline(config.data, [
        ["SET", config.counterKey, Number(value ?? 0) + 1],
        ["DECR", config.holdersKey],
      ]);
      shared.sections++;
    } catch (error) {
      fail(error);
    }
    const held = call;
    tracer?.record("release", undefined, caller);
    try {
      await inCall(held, () => client.release(handle));
    } catch (error) {
      fail(error);
    }
    held.done = true;
    if (Date.now() <= end) {
      figures.handoffs++;
      figures.waits.push(waited);
    }
  }
  clearTimeout(atEnd);
}
