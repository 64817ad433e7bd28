/** Helpers shared by the integration tests: raw commands to a node, unique key names. */

import type { RedisArgument, RedisReply } from "../../../src/index.js";
import { restNode } from "../../../src/index.js";

export type Endpoint = { url: string; token: string };

/** Send one command straight to a node's REST bridge (not through the lock). */
export async function raw(endpoint: Endpoint, ...args: RedisArgument[]): Promise<RedisReply> {
  return restNode(endpoint).command(args, AbortSignal.timeout(5000));
}

let counter = 0;
/** A key name no other test uses. */
export function uniqueKey(label: string): string {
  counter++;
  return `test:${label}:${process.pid}:${Date.now().toString(36)}:${counter}`;
}
