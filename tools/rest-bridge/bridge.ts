import type { AddressInfo } from "node:net";
import { createAdaptorServer } from "@hono/node-server";
import { createBridgeApp, type DelayPhase, type DelaySpec } from "./app.js";
import { RedisBackend } from "./redis-backend.js";

/** Options of {@link startBridge}. */
export interface BridgeOptions {
  /** Host of the redis-server. Default "127.0.0.1". */
  redisHost?: string;
  /** Port of the redis-server. */
  redisPort: number;
  /** Bearer token clients must send. */
  token: string;
  /** Interface the HTTP server listens on. Default "127.0.0.1" (loopback only). */
  host?: string;
  /** HTTP port; 0 (the default) picks a free one. */
  port?: number;
  /** Largest accepted request body in bytes. Default 1 MiB. */
  maxBodyBytes?: number;
  /**
   * How long a command may wait for Redis before the request fails with 504. Default 10 000 ms.
   * Only a paused (SIGSTOP) or overloaded redis-server gets there; a dead one fails at once (503).
   */
  commandTimeoutMs?: number;
  /** Receives diagnostics (Redis connection errors and reconnects). Silent when omitted. */
  log?: (message: string) => void;
  /**
   * Serve administration commands (SHUTDOWN, CONFIG, DEBUG, CLIENT, SCRIPT KILL, …), which the
   * bridge refuses like Upstash does. Only for a test that needs one: any client holding the token
   * could then stop or reconfigure the redis-server.
   * @default false
   */
  allowAdminCommands?: boolean;
}

/** A running bridge. */
export interface Bridge {
  /** Base URL for `@upstash/redis` (`new Redis({ url, token })`), e.g. "http://127.0.0.1:39213". */
  readonly url: string;
  /** The HTTP port actually bound. */
  readonly port: number;
  /**
   * Fault hook: delays every HTTP response by `ms` (0 turns it off). By default the command runs
   * first and its response is held back (the "applied but slow to confirm" case); with
   * `phase: "request"` the command itself starts late.
   */
  setDelay(ms: number, phase?: DelayPhase): void;
  /**
   * Fault hook: every request also waits a random delay, uniform in `[0, maxMs)`, before its
   * command runs (0 turns it off). Combines with {@link Bridge.setDelay}.
   */
  setJitter(maxMs: number): void;
  /** HTTP requests received since the bridge started (any route, any outcome). */
  requestCount(): number;
  /** Commands received in well-formed requests since the bridge started, by lower-case name. */
  commandCounts(): Record<string, number>;
  /**
   * Resolves once the bridge's connection to Redis is ready, so that requests reach Redis instead
   * of failing fast with 503; rejects after `timeoutMs` (default 10 000 ms).
   */
  ready(timeoutMs?: number): Promise<void>;
  /** Stops the HTTP server (dropping kept-alive connections) and closes the Redis connection. */
  close(): Promise<void>;
}

/**
 * Starts an HTTP server speaking the Upstash Redis REST protocol in front of one redis-server.
 *
 * Resolves once the HTTP port is bound. It does not wait for Redis (see {@link Bridge.ready}):
 * until Redis is reachable, requests fail fast with 503, and the bridge keeps reconnecting in the
 * background (a restarted redis-server on the same port is picked up within ~250 ms).
 */
export async function startBridge(options: BridgeOptions): Promise<Bridge> {
  const host = options.host ?? "127.0.0.1";
  let delay: DelaySpec = { ms: 0, phase: "response", jitterMs: 0 };
  let requests = 0;
  const commands: Record<string, number> = {};
  const backend = new RedisBackend({
    host: options.redisHost ?? "127.0.0.1",
    port: options.redisPort,
    commandTimeoutMs: options.commandTimeoutMs ?? 10_000,
    log: options.log,
  });
  const app = createBridgeApp({
    token: options.token,
    runner: backend,
    maxBodyBytes: options.maxBodyBytes ?? 1024 * 1024,
    delay: () => delay,
    allowAdminCommands: options.allowAdminCommands ?? false,
    onRequest: () => {
      requests++;
    },
    onCommands: (received) => {
      for (const [name] of received) {
        const key = String(name).toLowerCase();
        commands[key] = (commands[key] ?? 0) + 1;
      }
    },
  });
  const server = createAdaptorServer({ fetch: app.fetch, hostname: host });

  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port ?? 0, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (err) {
    backend.close();
    throw err;
  }

  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  let closed: Promise<void> | undefined;

  return {
    url: `http://${urlHost}:${port}`,
    port,
    setDelay(ms, phase = "response") {
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`invalid delay: ${ms}`);
      delay = { ...delay, ms, phase };
    },
    setJitter(maxMs) {
      if (!Number.isFinite(maxMs) || maxMs < 0) throw new RangeError(`invalid jitter: ${maxMs}`);
      delay = { ...delay, jitterMs: maxMs };
    },
    requestCount: () => requests,
    commandCounts: () => ({ ...commands }),
    ready: (timeoutMs = 10_000) => backend.ready(timeoutMs),
    close() {
      closed ??= new Promise<void>((resolve) => {
        // @upstash/redis uses keep-alive: without closeAllConnections, close() would wait for
        // idle sockets to time out.
        server.close(() => resolve());
        if ("closeAllConnections" in server) server.closeAllConnections();
        backend.close();
      });
      return closed;
    },
  };
}
