/**
 * A client process of the isolates parts, standing in for one isolate: prepares its client and
 * latency when told "prepare", runs its callers on "go", and sends its figures once the window
 * and the drain are over (or every caller's last call ended). Then it exits, which ends any call
 * still running, so nothing it sends reaches the next run; it exits too when the parent goes away.
 * Run as an esbuild bundle (see ./isolate-bundle.ts) so that 16 of them start in a second or two.
 */
import { type PreparedIsolate, prepareIsolate } from "./isolate-clients.js";
import type { IsolateConfig, IsolateReply, IsolateRequest } from "./isolate-protocol.js";
import { sleep } from "./stats.js";

let prepared: PreparedIsolate | undefined;

function reply(message: IsolateReply, exitCode?: number): void {
  process.send?.(message, () => {
    if (exitCode !== undefined) process.exit(exitCode);
  });
}

async function prepare(config: IsolateConfig): Promise<void> {
  prepared = await prepareIsolate(config);
  reply({ type: "ready" });
}

async function go(startAt: number, windowMs: number, drainMs: number): Promise<void> {
  if (!prepared) throw new Error("go before prepare");
  const { figures, done } = prepared.start(startAt, windowMs);
  const cutoff = sleep(Math.max(0, startAt + windowMs + drainMs - Date.now()));
  await Promise.race([done, cutoff]);
  reply({ type: "results", figures: figures() }, 0);
}

process.on("message", (message: IsolateRequest) => {
  const work =
    message.type === "prepare" ? prepare(message.config) : go(message.startAt, message.windowMs, message.drainMs);
  work.catch((error: Error) => reply({ type: "failed", error: `${message.type}: ${error.stack ?? error.message}` }, 1));
});
process.on("disconnect", () => process.exit(0));
