/**
 * A client process of the hot-key part: creates its share of the clients, reports "ready", runs
 * when told "go", and sends its results once the window plus a short grace period is over (or
 * every loop has ended). Then it exits, which also ends any acquire still retrying, so no
 * leftover request reaches the next run. It exits too when the parent goes away.
 */
import { type HotKeyConfig, type PreparedClients, prepareClients } from "./hotkey-clients.js";
import type { WorkerReply, WorkerRequest } from "./hotkey-protocol.js";
import { sleep } from "./stats.js";

let prepared: PreparedClients | undefined;

function reply(message: WorkerReply, exitCode?: number): void {
  process.send?.(message, () => {
    if (exitCode !== undefined) process.exit(exitCode);
  });
}

async function prepare(config: HotKeyConfig): Promise<void> {
  prepared = await prepareClients(config);
  reply({ type: "ready" });
}

async function go(startAt: number, windowMs: number, graceMs: number): Promise<void> {
  if (!prepared) throw new Error("go before prepare");
  const { results, done } = prepared.start(startAt, windowMs);
  const cutoff = sleep(Math.max(0, startAt + windowMs + graceMs - Date.now()));
  await Promise.race([done, cutoff]);
  reply({ type: "results", results: structuredClone(results) }, 0);
}

process.on("message", (message: WorkerRequest) => {
  const work =
    message.type === "prepare" ? prepare(message.config) : go(message.startAt, message.windowMs, message.graceMs);
  work.catch((error: Error) => reply({ type: "failed", error: `${message.type}: ${error.stack ?? error.message}` }, 1));
});
process.on("disconnect", () => process.exit(0));
