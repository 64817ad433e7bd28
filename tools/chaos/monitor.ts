/**
 * The nodes' audit log for checker 3: a MONITOR connection straight to every lock node's
 * redis-server (not through the REST bridge, which refuses admin commands), turned into
 * `monitor` history events. Only what the replay needs is kept: writes to lock keys, the
 * EVAL/EVALSHA lines that frame a script's own calls, and those calls. Values and script
 * arguments are reduced to token hashes.
 * @module
 */
import { createHash, randomUUID } from "node:crypto";
import { connect, type Socket } from "node:net";
import { Redis } from "ioredis";
import { within } from "../../src/base/signals.js";
import { extendScript } from "../../src/core/scripts/extend.js";
import { releaseScript } from "../../src/core/scripts/release.js";
import { gateScript } from "../../src/waiting/scripts/gate.js";
import { gateReleaseScript } from "../../src/waiting/scripts/gate-release.js";
import { handOverScript } from "../../src/waiting/scripts/hand-over.js";
import { harnessNow } from "./clock.js";
import { type HistoryEvent, type MonitorEvent, tokenId } from "./history.js";

type ScriptNames = Map<string, "extend" | "release" | "other">;

/** Marker in the harness's own scripts, so the replay never mistakes them for the library's. */
export const HARNESS_SCRIPT_MARKER = "-- chaos-harness";

/** Options of {@link startMonitors}. */
export interface MonitorOptions {
  /** redis-server port of every lock node. */
  readonly ports: readonly number[];
  /** Only keys starting with this prefix are lock keys. */
  readonly keyPrefix: string;
  /** Lock keys outside the prefix (a resource whose name cannot start with it: JSON-looking names). */
  readonly extraKeys?: ReadonlySet<string>;
  /**
   * Per node, a tag put in front of every key it reports (default none): the nodes of a second
   * cluster with the same resource names report them as the clients of that cluster record them.
   */
  readonly keyTags?: readonly string[];
  /** Receives each event. */
  readonly emit: (event: HistoryEvent) => void;
}

/** Running MONITOR connections. */
export interface Monitors {
  /**
   * Re-opens node i's MONITOR (after a restart, or on another port after a failover) and records
   * a `monitor-reset`: `empty` when the node came back without state, `gap` when lines were missed.
   * `since` (harness time, default now): when the node could first run commands the stream did not
   * show, i.e. before the restart or the failover began. A restarted node serves clients before
   * its MONITOR is open again: a reset stamped only then left the replay with the node's state
   * from before its restart, without the keys clients set in between.
   */
  reconnect(node: number, reason: "empty" | "gap", port?: number, since?: number): Promise<void>;
  /**
   * Waits until every running node's stream has caught up with now: an `ECHO` of a fresh marker,
   * sent to each node, shows up in its MONITOR stream. A node that does not answer the `ECHO`
   * within `timeoutMs` (down, or paused: no scenario ends with a node paused) is skipped.
   * @throws when a stream does not show its marker within `timeoutMs`: the log is incomplete.
   */
  drain(timeoutMs: number): Promise<void>;
  /** Lines seen per node. */
  lines(): number[];
  close(): Promise<void>;
}

/**
 * Classifies a script by its source: the library's extend (compare-and-PEXPIRE) and release
 * (compare-and-DEL), or anything else (acquire-all, verify, inspect, the harness's own scripts).
 */
export function classifyScript(source: string): "extend" | "release" | "other" {
  if (source.includes(HARNESS_SCRIPT_MARKER)) return "other";
  // The gate's release is a compare-and-DEL with the token first, like the release (its PEXPIRE
  // touches only the gate's own stats key); so is the hand-over, whose SET of the next holder's
  // token, like the gate's, comes after its check of the keys. The gate's poll sets lock keys when it takes them,
  // and its leave deletes only a key holding the waiter's own placeholder token (ARGV[3]): both
  // are acquisitions to the replay, not extensions or releases.
  if (source === gateReleaseScript.source) return "release";
  if (source === gateScript.source) return "other";
  if (source.includes('"PEXPIRE"')) return "extend";
  if (source.includes('"DEL"')) return "release";
  return "other";
}

/**
 * Turns one MONITOR line into an event, or `undefined` when the replay does not need it.
 * `scripts` maps SHA-1 to script name, learned from EVAL lines (the library sends EVAL after a
 * NOSCRIPT, so every node sees each script's source before its first successful EVALSHA).
 */
export function monitorLineToEvent(
  line: { time: string; args: readonly string[]; source: string },
  node: number,
  seq: number,
  keyPrefix: string,
  scripts: Map<string, "extend" | "release" | "other">,
  keys: { readonly extra?: ReadonlySet<string>; readonly tag?: string } = {},
): MonitorEvent | undefined {
  const tag = keys.tag ?? "";
  const [rawCmd, ...rest] = line.args;
  if (rawCmd === undefined) return undefined;
  const cmd = rawCmd.toUpperCase();
  const source: "client" | "lua" = line.source === "lua" ? "lua" : "client";
  const [sec, usec = "0"] = line.time.split(".");
  const t = Number(sec) * 1000 + Number(usec.padEnd(6, "0")) / 1000;
  const base = { t, process: `node${node}`, type: "info" as const, f: "monitor" as const, node, seq, source, cmd };
  if (source === "client" && (cmd === "EVAL" || cmd === "EVALSHA")) {
    const [body = "", numKeysText = "0", ...keysAndArgs] = rest;
    let script: "extend" | "release" | "other";
    if (cmd === "EVAL") {
      script = classifyScript(body);
      scripts.set(createHash("sha1").update(body).digest("hex"), script);
    } else {
      script = scripts.get(body.toLowerCase()) ?? "other";
    }
    const numKeys = Number(numKeysText);
    const key = keysAndArgs[0];
    const token = keysAndArgs[numKeys];
    return {
      ...base,
      script,
      ...(key === undefined ? {} : { key: tag + key }),
      ...(token === undefined ? {} : { value: tokenId(token) }),
    };
  }
  const raw = rest[0];
  if (raw === undefined || !(raw.startsWith(keyPrefix) || keys.extra?.has(raw))) {
    return cmd === "FLUSHALL" || cmd === "FLUSHDB" ? { ...base, cmd: "FLUSHALL" } : undefined;
  }
  const key = tag + raw;
  if (cmd === "SET") {
    const options = rest.slice(2).map((a) => a.toUpperCase());
    const px = options.indexOf("PX");
    return {
      ...base,
      key,
      value: tokenId(rest[1] ?? ""),
      nx: options.includes("NX"),
      ...(px >= 0 ? { ms: Number(rest[2 + px + 1]) } : {}),
    };
  }
  if (cmd === "PEXPIRE") return { ...base, key, ms: Number(rest[1]) };
  if (cmd === "DEL" || cmd === "UNLINK") return { ...base, key };
  return undefined;
}

/** Opens a MONITOR on every node. */
export async function startMonitors(options: MonitorOptions): Promise<Monitors> {
  const ports = [...options.ports];
  const connections: (Socket | undefined)[] = ports.map(() => undefined);
  const seqs = ports.map(() => 0);
  // The library's own scripts are known up front; others (a patched build's) are learned from EVAL.
  const known = () =>
    new Map<string, "extend" | "release" | "other">([
      [extendScript.sha1, classifyScript(extendScript.source)],
      [releaseScript.sha1, classifyScript(releaseScript.source)],
      [gateReleaseScript.sha1, classifyScript(gateReleaseScript.source)],
      [handOverScript.sha1, classifyScript(handOverScript.source)],
      [gateScript.sha1, classifyScript(gateScript.source)],
    ]);
  const scripts = ports.map(known);
  // Markers sent by drain(), per node, and what to call when the stream shows them.
  const markers = ports.map(() => new Map<string, () => void>());

  const open = async (node: number): Promise<void> => {
    const socket = await openMonitor(ports[node] as number, (line, raw) => {
      const seq = seqs[node] ?? 0;
      seqs[node] = seq + 1;
      for (const [marker, seen] of markers[node] as Map<string, () => void>) if (raw.includes(marker)) seen();
      if (!line) return;
      const keys = {
        ...(options.extraKeys ? { extra: options.extraKeys } : {}),
        ...(options.keyTags?.[node] ? { tag: options.keyTags[node] } : {}),
      };
      const event = monitorLineToEvent(line, node, seq, options.keyPrefix, scripts[node] as ScriptNames, keys);
      if (event) options.emit(event);
    });
    connections[node] = socket;
  };

  await Promise.all(ports.map((_, i) => open(i)));
  return {
    async reconnect(node, reason, port, since) {
      connections[node]?.destroy();
      if (port !== undefined) ports[node] = port;
      scripts[node] = known();
      // The reset takes its place in the stream before any line of the new connection, and its
      // time is when the node may first have run a command the stream missed: from then on, the
      // replay does not know the node's keys.
      const seq = seqs[node] ?? 0;
      seqs[node] = seq + 1;
      await open(node);
      const t = Math.min(since ?? Number.POSITIVE_INFINITY, harnessNow());
      options.emit({ t, process: `node${node}`, type: "info", f: "monitor-reset", node, seq, reason });
    },
    async drain(timeoutMs) {
      await Promise.all(
        ports.map(async (port, node) => {
          const pending = markers[node] as Map<string, () => void>;
          const marker = `chaos-drain-${randomUUID()}`;
          const seen = new Promise<void>((resolve) => pending.set(marker, resolve));
          try {
            const redis = new Redis({
              host: "127.0.0.1",
              port,
              lazyConnect: true,
              maxRetriesPerRequest: 0,
              enableReadyCheck: false,
              // A paused node answers nothing: skipped like a down one, not waited on forever.
              connectTimeout: timeoutMs,
              commandTimeout: timeoutMs,
            });
            redis.on("error", () => {});
            try {
              await redis.connect();
              await redis.echo(marker);
            } catch {
              return;
            } finally {
              redis.disconnect();
            }
            const caughtUp = await within(
              seen.then(() => true),
              timeoutMs,
            );
            if (!caughtUp) throw new Error(`node ${node}'s MONITOR stream did not catch up within ${timeoutMs} ms`);
          } finally {
            pending.delete(marker);
          }
        }),
      );
    },
    lines: () => [...seqs],
    async close() {
      for (const c of connections) c?.destroy();
    },
  };
}

/** Lines whose command the replay needs (writes to keys, scripts, flushes). */
const RELEVANT = /^\+[\d.]+ \[\d+ [^\]]+\] "(?:set|eval|evalsha|del|unlink|pexpire|flushall|flushdb)"/i;

/**
 * Opens a raw MONITOR connection (RESP over TCP) and calls `onLine` for every line after the +OK.
 * Resolves once the server confirmed MONITOR. A closed connection simply stops the stream.
 */
function openMonitor(
  port: number,
  onLine: (line: { time: string; args: string[]; source: string } | undefined, raw: string) => void,
): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let buffer = "";
    let confirmed = false;
    socket.setEncoding("latin1");
    socket.once("error", (error) => {
      if (!confirmed) reject(error);
    });
    socket.on("error", () => {});
    socket.on("connect", () => socket.write("*1\r\n$7\r\nMONITOR\r\n"));
    socket.on("data", (chunk: string) => {
      buffer += chunk;
      let end = buffer.indexOf("\r\n");
      while (end >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf("\r\n");
        if (!confirmed) {
          if (line === "+OK") {
            confirmed = true;
            resolve(socket);
          } else {
            reject(new Error(`MONITOR refused: ${line.slice(0, 80)}`));
          }
          continue;
        }
        // Most lines are reads (the audits' GET/PTTL): skip them before parsing every argument.
        if (!RELEVANT.test(line)) {
          onLine(undefined, line);
          continue;
        }
        const parsed = parseMonitorLine(line);
        if (parsed) onLine(parsed, line);
      }
    });
  });
}

/**
 * Parses one MONITOR line, e.g. `+1795332124.849890 [0 lua] "DEL" "k"`, whose arguments are
 * quoted the way Redis's sdscatrepr quotes them (\\ \" \n \r \t \a \b \xHH).
 */
export function parseMonitorLine(line: string): { time: string; args: string[]; source: string } | undefined {
  const match = /^\+(\d+\.\d+) \[(\d+) ([^\]]+)\] (.*)$/.exec(line);
  if (!match) return undefined;
  const [, time, , source, rest] = match as unknown as [string, string, string, string, string];
  const args: string[] = [];
  let i = 0;
  while (i < rest.length) {
    if (rest[i] === " ") {
      i++;
      continue;
    }
    if (rest[i] !== '"') return undefined;
    i++;
    let value = "";
    while (i < rest.length && rest[i] !== '"') {
      if (rest[i] === "\\") {
        const next = rest[i + 1];
        const escapes: Record<string, string> = { n: "\n", r: "\r", t: "\t", a: "\x07", b: "\b", '"': '"', "\\": "\\" };
        if (next === "x") {
          value += String.fromCharCode(Number.parseInt(rest.slice(i + 2, i + 4), 16));
          i += 4;
        } else {
          value += escapes[next ?? ""] ?? next ?? "";
          i += 2;
        }
      } else {
        value += rest[i];
        i++;
      }
    }
    i++;
    args.push(value);
  }
  return { time, args, source };
}
