/** Messages between the hot-key part and its client processes (./hotkey-worker.ts). */
import type { ClientResult, HotKeyConfig } from "./hotkey-clients.js";

export type WorkerRequest =
  | { type: "prepare"; config: HotKeyConfig }
  | { type: "go"; startAt: number; windowMs: number; graceMs: number };

export type WorkerReply =
  | { type: "ready" }
  | { type: "results"; results: ClientResult[] }
  | { type: "failed"; error: string };
