/**
 * Reads the demo worker's configuration from its environment bindings.
 *
 * Nodes: either `REDLOCK_NODES`, a JSON array of `{ "url", "token" }`, or numbered pairs
 * `REDLOCK_REST_URL_1` / `REDLOCK_REST_TOKEN_1`, `REDLOCK_REST_URL_2` / `REDLOCK_REST_TOKEN_2`, …
 * (the names Upstash's console uses, numbered). `API_SECRET` is the Bearer secret every route needs.
 */
import type { TelemetryBindings } from "./telemetry.js";

export interface Bindings extends TelemetryBindings {
  REDLOCK_NODES?: string;
  API_SECRET?: string;
  [name: `REDLOCK_REST_URL_${number}` | `REDLOCK_REST_TOKEN_${number}`]: string | undefined;
}

export interface NodeEndpoint {
  url: string;
  token: string;
}

/** Thrown when the bindings are missing or malformed: the worker answers 500 without details. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

export function nodesFromEnv(env: Bindings): NodeEndpoint[] {
  if (env.REDLOCK_NODES) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(env.REDLOCK_NODES);
    } catch {
      throw new ConfigError("REDLOCK_NODES is not valid JSON");
    }
    if (!Array.isArray(parsed) || parsed.length === 0)
      throw new ConfigError("REDLOCK_NODES must be a non-empty JSON array");
    return parsed.map((node, i) => {
      const { url, token } = (node ?? {}) as Partial<NodeEndpoint>;
      if (typeof url !== "string" || typeof token !== "string") {
        throw new ConfigError(`REDLOCK_NODES[${i}] needs string "url" and "token"`);
      }
      return { url, token };
    });
  }
  const nodes: NodeEndpoint[] = [];
  for (let n = 1; ; n++) {
    const url = env[`REDLOCK_REST_URL_${n}`];
    const token = env[`REDLOCK_REST_TOKEN_${n}`];
    if (url === undefined && token === undefined) break;
    if (!url || !token) throw new ConfigError(`REDLOCK_REST_URL_${n} and REDLOCK_REST_TOKEN_${n} must both be set`);
    nodes.push({ url, token });
  }
  if (nodes.length === 0) throw new ConfigError("set REDLOCK_NODES or REDLOCK_REST_URL_1/REDLOCK_REST_TOKEN_1, …");
  return nodes;
}

export function secretFromEnv(env: Bindings): string {
  if (!env.API_SECRET) throw new ConfigError("API_SECRET is not set");
  return env.API_SECRET;
}
