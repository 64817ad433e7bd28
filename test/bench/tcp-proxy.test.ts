/**
 * The benchmark's delaying TCP proxy: a byte stream through it arrives whole and in order even
 * when every chunk gets its own random delay, the fixed delay holds back the server's answers,
 * and the request delay holds back what the client sends (the server sees it late).
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTcpProxy, type TcpProxy } from "../../tools/bench/tcp-proxy.js";

let echo: Server;
let proxy: TcpProxy;
const sockets: Socket[] = [];
/** When the echo server last received data (performance.now()). */
let receivedAt = 0;

beforeAll(async () => {
  echo = createServer((socket) => {
    sockets.push(socket);
    socket.on("data", (chunk) => {
      receivedAt = performance.now();
      socket.write(chunk);
    });
  });
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
  proxy = await startTcpProxy((echo.address() as { port: number }).port);
});

afterAll(async () => {
  await proxy.close();
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => echo.close(resolve));
});

function open(): Promise<Socket> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port: proxy.port }, () => resolve(socket));
  });
}

describe("delaying TCP proxy", () => {
  it("keeps a stream in order under per-chunk jitter", async () => {
    proxy.setDelay({ fixedMs: 0, jitterMs: 30 });
    const socket = await open();
    let received = "";
    socket.on("data", (chunk) => {
      received += chunk.toString();
    });
    let sent = "";
    for (let i = 0; i < 200; i++) {
      const piece = `${i},`;
      sent += piece;
      socket.write(piece);
      if (i % 10 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    const deadline = Date.now() + 10_000;
    while (received.length < sent.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    socket.destroy();
    expect(received).toBe(sent);
  });

  it("counts the RESP commands clients send, by name, across chunk boundaries", async () => {
    proxy.setDelay({ fixedMs: 0, jitterMs: 0 });
    const before = proxy.commandCounts();
    const socket = await open();
    const command = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n";
    socket.write(command.slice(0, 10));
    await new Promise((resolve) => setTimeout(resolve, 20));
    socket.write(command.slice(10));
    const deadline = Date.now() + 5_000;
    while ((proxy.commandCounts().ping ?? 0) === (before.ping ?? 0) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    socket.destroy();
    const after = proxy.commandCounts();
    expect((after.set ?? 0) - (before.set ?? 0)).toBe(1);
    expect((after.ping ?? 0) - (before.ping ?? 0)).toBe(1);
  });

  it("holds the server's answers back by the fixed delay", async () => {
    proxy.setDelay({ fixedMs: 150, jitterMs: 0 });
    const socket = await open();
    const started = performance.now();
    const answered = new Promise<number>((resolve) => socket.once("data", () => resolve(performance.now() - started)));
    socket.write("ping");
    expect(await answered).toBeGreaterThanOrEqual(145);
    socket.destroy();
    proxy.setDelay({ fixedMs: 0, jitterMs: 0 });
  });

  it("holds the client's chunks back by the request delay, and the answer by the fixed delay after it", async () => {
    proxy.setDelay({ fixedMs: 60, jitterMs: 0, requestMs: 90 });
    const socket = await open();
    const started = performance.now();
    const answered = new Promise<number>((resolve) => socket.once("data", () => resolve(performance.now() - started)));
    socket.write("ping");
    const roundTrip = await answered;
    expect(receivedAt - started).toBeGreaterThanOrEqual(85);
    expect(roundTrip).toBeGreaterThanOrEqual(145);
    expect(roundTrip - (receivedAt - started)).toBeGreaterThanOrEqual(55);
    socket.destroy();
    proxy.setDelay({ fixedMs: 0, jitterMs: 0 });
  });
});
