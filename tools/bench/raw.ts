/**
 * The bare transports, without any lock library: one REST command by `fetch`, one RESP command
 * over a kept-open TCP socket. They give the floor (the physical limit of a round trip) and run
 * the benchmark's critical section.
 */
import { connect, type Socket } from "node:net";

export type Reply = string | number | null | Reply[];

/** A REST endpoint (Upstash protocol). */
export interface RestEndpoint {
  url: string;
  token: string;
}

/** One command (or a pipeline, with `path: "/pipeline"`) over REST; returns the parsed JSON body. */
export async function restCall(endpoint: RestEndpoint, body: unknown, path = "/"): Promise<unknown> {
  const response = await fetch(new URL(path, endpoint.url), {
    method: "POST",
    headers: { authorization: `Bearer ${endpoint.token}` },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as unknown;
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${JSON.stringify(json)}`);
  return json;
}

/** One command over REST; returns its `result`. */
export async function restCommand(endpoint: RestEndpoint, args: (string | number)[]): Promise<Reply> {
  const json = (await restCall(endpoint, args)) as { result?: Reply; error?: string };
  if (json.error) throw new Error(json.error);
  return json.result ?? null;
}

/** Several commands in one REST request (`/pipeline`); returns each result. */
export async function restPipeline(endpoint: RestEndpoint, commands: (string | number)[][]): Promise<Reply[]> {
  const json = (await restCall(endpoint, commands, "/pipeline")) as { result?: Reply; error?: string }[];
  return json.map((entry) => {
    if (entry.error) throw new Error(entry.error);
    return entry.result ?? null;
  });
}

/** A minimal RESP2 client on one socket: commands are sent in order and answered in order. */
export class RespConnection {
  private buffer: Buffer = Buffer.alloc(0);
  private readonly waiting: { resolve: (r: Reply) => void; reject: (e: Error) => void }[] = [];

  private constructor(private readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
      for (;;) {
        const parsed = parse(this.buffer, 0);
        if (!parsed) break;
        this.buffer = this.buffer.subarray(parsed.end);
        const next = this.waiting.shift();
        if (parsed.error) next?.reject(new Error(parsed.error));
        else next?.resolve(parsed.value);
      }
    });
    const failAll = (error: Error) => {
      for (const w of this.waiting.splice(0)) w.reject(error);
    };
    socket.on("error", failAll);
    socket.on("close", () => failAll(new Error("connection closed")));
  }

  static open(port: number): Promise<RespConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: "127.0.0.1", port }, () => resolve(new RespConnection(socket)));
      socket.once("error", reject);
    });
  }

  command(args: (string | number)[]): Promise<Reply> {
    let out = `*${args.length}\r\n`;
    for (const arg of args) {
      const text = String(arg);
      out += `$${Buffer.byteLength(text)}\r\n${text}\r\n`;
    }
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.socket.write(out);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

type Parsed = { value: Reply; error?: string; end: number };

/** Parses one RESP2 value at `offset`, or returns undefined when it is not complete yet. */
export function parseResp(buffer: Buffer, offset: number): Parsed | undefined {
  return parse(buffer, offset);
}

function parse(buffer: Buffer, offset: number): Parsed | undefined {
  const lineEnd = buffer.indexOf("\r\n", offset);
  if (lineEnd < 0) return undefined;
  const type = String.fromCharCode(buffer[offset] as number);
  const line = buffer.toString("utf8", offset + 1, lineEnd);
  const after = lineEnd + 2;
  switch (type) {
    case "+":
      return { value: line, end: after };
    case "-":
      return { value: null, error: line, end: after };
    case ":":
      return { value: Number(line), end: after };
    case "$": {
      const length = Number(line);
      if (length < 0) return { value: null, end: after };
      if (buffer.length < after + length + 2) return undefined;
      return { value: buffer.toString("utf8", after, after + length), end: after + length + 2 };
    }
    case "*": {
      const count = Number(line);
      if (count < 0) return { value: null, end: after };
      const items: Reply[] = [];
      let position = after;
      for (let i = 0; i < count; i++) {
        const item = parse(buffer, position);
        if (!item) return undefined;
        items.push(item.value);
        position = item.end;
      }
      return { value: items, end: position };
    }
    default:
      throw new Error(`unexpected RESP type byte ${JSON.stringify(type)}`);
  }
}

/** Resolves when `count` of the promises have settled (whatever their outcome). */
export function settledCount(promises: readonly Promise<unknown>[], count: number): Promise<void> {
  return new Promise((resolve) => {
    let settled = 0;
    const one = () => {
      settled++;
      if (settled === count) resolve();
    };
    for (const p of promises) p.then(one, one);
  });
}

/** The compare-and-delete script every floor and peer release amounts to. */
export const COMPARE_AND_DELETE =
  'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end';
