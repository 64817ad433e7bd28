/**
 * Helpers of the semaphore and read-write lock unit tests: memory nodes seen through wrappers
 * that count or delay each client's requests, and what the nodes hold.
 */
import type { RedisArgument, RedisNode, RedisReply } from "../../../src/index.js";
import { semaphoreLineScript } from "../../../src/primitives/scripts/semaphore-line.js";
import { semaphoreProbeScript } from "../../../src/primitives/scripts/semaphore-probe.js";
import type { MemoryNode } from "../../../src/testing/index.js";
import type { ReadWriteNodeState } from "../../../tools/chaos/checkers/primitives.js";

/** A node seen through a wrapper that logs every command sent through it. */
export function counted(node: RedisNode, log: RedisArgument[][]): RedisNode {
  return {
    id: node.id,
    command(args, signal) {
      log.push([...args]);
      return node.command(args, signal);
    },
  };
}

/** A node whose requests from this client reach it `ms` late (an abort before then cancels them). */
export function delayed(node: RedisNode, ms: number): RedisNode {
  if (ms === 0) return node;
  return {
    id: node.id,
    command(args, signal) {
      return new Promise<RedisReply>((resolve, reject) => {
        // A node stops listening to the signal once its answer is on the way (fan-outs reuse it).
        const onAbort = () => {
          clearTimeout(timer);
          reject(signal.reason);
        };
        const timer = setTimeout(() => {
          signal.removeEventListener("abort", onAbort);
          node.command(args, signal).then(resolve, reject);
        }, ms);
        signal.addEventListener("abort", onAbort, { once: true });
      });
    },
  };
}

/** Commands of a log by kind: plain `SET`s, probes, polls of a semaphore's line and leavings of it. */
export function kinds(log: readonly RedisArgument[][]): {
  sets: number;
  probes: number;
  polls: number;
  leaves: number;
} {
  let sets = 0;
  let probes = 0;
  let polls = 0;
  let leaves = 0;
  for (const args of log) {
    if (args[0] === "SET") sets++;
    if (args[1] === semaphoreProbeScript.sha1 || args[1] === semaphoreProbeScript.source) probes++;
    if (args[1] === semaphoreLineScript.sha1 || args[1] === semaphoreLineScript.source) {
      if (args.includes("leave")) leaves++;
      else polls++;
    }
  }
  return { sets, probes, polls, leaves };
}

/** Per node, the tokens in the slot keys of the semaphore `name`. */
export function slotHolders(nodes: readonly MemoryNode[], name: string): Set<string>[] {
  const prefix = `__edge-redlock__:semaphore:${name.length}:${name}:`;
  return nodes.map(
    (node) =>
      new Set(
        node
          .keys()
          .filter((key) => key.startsWith(prefix))
          .map((key) => node.get(key) as string),
      ),
  );
}

/** The keys of the read-write lock `name` on a node: write key, readers, writer-waiting mark. */
export function rwKeys(name: string): { write: string; readers: string; mark: string } {
  const base = `__edge-redlock__:rw:${name.length}:${name}:`;
  return { write: `${base}write`, readers: `${base}readers`, mark: `${base}writer-waiting` };
}

/** What a node holds for the read-write lock `name`: its writer, and its readers live at `now` (node clock). */
export async function rwState(node: MemoryNode, name: string, now: number): Promise<ReadWriteNodeState> {
  const keys = rwKeys(name);
  const range = (await node.command(["ZRANGE", keys.readers, 0, -1, "WITHSCORES"], new AbortController().signal)) as
    | string[]
    | null;
  const readers = new Set<string>();
  for (let i = 0; i + 1 < (range?.length ?? 0); i += 2) {
    if (Number(range?.[i + 1]) > now) readers.add(range?.[i] as string);
  }
  return { writer: node.get(keys.write), readers };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Wait until `check` holds, polling every 5 ms, for at most `ms`. */
export async function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("condition not reached");
    await sleep(5);
  }
}
