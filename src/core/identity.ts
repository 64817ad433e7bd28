/**
 * What a node's requests reach: the key of state that an isolate's clients share (the waiting
 * strategy's, the cluster check's), so that two clients share it only when they reach the same
 * servers.
 * @module
 */
import type { RedisNode } from "../transport/rest.js";

const objectNumbers = new WeakMap<object, number>();
let objectsNumbered = 0;

function numberOf(object: object): number {
  let n = objectNumbers.get(object);
  if (n === undefined) {
    n = ++objectsNumbered;
    objectNumbers.set(object, n);
  }
  return n;
}

/**
 * What a node's requests reach, for sharing an isolate's state between clients: two clients share
 * it only when every node of theirs is the same in this sense. A node made from `{ url, token }` is
 * its full URL, its REST token (one URL may serve several databases or tenants by token) and the
 * `fetch` it was given, if any (a custom one may route anywhere); never its display `id`, which
 * the caller chooses and two clusters may share. A `RedisNode` passed in is only ever itself. The
 * result is an in-memory map key: it holds the REST token and must never be shown.
 * @param config what the client was given for the node: the node itself, or its REST config.
 */
export function nodeIdentity(node: RedisNode, config: object): string {
  if (config === node) return `object ${numberOf(node)}`;
  const { url, token, fetch: custom } = config as { url: string; token: string; fetch?: unknown };
  const via = typeof custom === "function" ? ` fetch ${numberOf(custom)}` : "";
  return `rest ${new URL(url).href} ${JSON.stringify(token)}${via}`;
}
