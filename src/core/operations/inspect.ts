/**
 * Reading a resource's key on every node: a diagnostic, not a lock check.
 * @module
 */
import type { Engine } from "../engine.js";
import { inspectOnNode } from "../node-operations.js";
import type { ResolvedOptions } from "../options.js";

/**
 * One node's view of a key, from `Redlock.inspect`. `value` is `null` for a free key; for a held
 * one, the holder's token is a capability (`Redlock.release(resources, token)` accepts it), so it
 * is shown as `…` and its last 4 characters unless `revealTokens` was asked for: enough to tell
 * holders apart, or a lock of yours (`lock.token.endsWith(…)`), not to release someone's lock.
 */
export type InspectedNode =
  | {
      /** The node's id. */
      readonly node: string;
      /** The key's value (the holder's token), or `null` when the key is missing. */
      readonly value: string | null;
      /** The key's remaining TTL in ms: -2 when it is missing, -1 when it has none. */
      readonly pttlMs: number;
    }
  | {
      /** The node's id. */
      readonly node: string;
      /** Why the node could not be read. */
      readonly error: Error;
    };

/** What `Redlock.inspect` returns. */
export interface InspectResult {
  /** The resource asked for. */
  readonly resource: string;
  /** Its key (`keyPrefix` + resource). */
  readonly key: string;
  /** Every node's view, in configuration order. */
  readonly nodes: readonly InspectedNode[];
}

/** Read `resource`'s key (value and PTTL) on every node, waiting for every answer. */
export async function inspectResource(
  engine: Engine,
  o: ResolvedOptions,
  resource: string,
  revealTokens: boolean,
): Promise<InspectResult> {
  const key = o.keyPrefix + resource;
  const values: ({ value: string | null; pttlMs: number } | undefined)[] = [];
  const fan = engine.fan(o, "inspect", [resource], {
    yes: "acquired",
    task: async (i, context) => {
      values[i] = await inspectOnNode(engine.node(i), key, context);
      return "acquired";
    },
  });
  const outcomes = await fan.outcomes;
  return {
    resource,
    key,
    nodes: outcomes.map((outcome, i) => {
      const value = values[i];
      return outcome.error || !value
        ? { node: outcome.node, error: outcome.error ?? new Error("no answer") }
        : { node: outcome.node, value: revealTokens ? value.value : tail(value.value), pttlMs: value.pttlMs };
    }),
  };
}

/** A token shown without handing it out. */
function tail(token: string | null): string | null {
  return token === null ? null : `…${token.slice(-4)}`;
}
