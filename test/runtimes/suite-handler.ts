/**
 * The portable suite behind a fetch handler, for runtimes that are driven by requests: the
 * workerd worker (test/runtimes/workerd/worker.ts) and the Vercel Edge sandbox
 * (test/runtimes/edge/entry.ts). Runtime-agnostic like the suite itself.
 *
 * - `GET /globals`: `typeof` of the Node-only globals, as this runtime sees them.
 * - `POST /run` with `{ case, input }`: runs one case; answers `{ ok, ms, error? }` (HTTP 200 either way).
 */
import type { EdgeRedlockModule, SuiteInput } from "./portable-suite.js";
import { CASE_NAMES, type CaseName, portableSuite } from "./portable-suite.js";

/** The request body of `POST /run`. */
export interface RunRequest {
  case: CaseName;
  input: SuiteInput;
}

/** The answer of `POST /run`. */
export interface RunResult {
  ok: boolean;
  ms: number;
  error?: string;
}

/** Node-only globals that an edge runtime does not have. */
export const NODE_ONLY_GLOBALS = ["Buffer", "process", "require", "setImmediate", "global", "__dirname"] as const;

export function suiteHandler(lib: EdgeRedlockModule): (request: Request) => Promise<Response> {
  return async (request) => {
    const { pathname } = new URL(request.url);
    if (request.method === "GET" && pathname === "/globals") {
      const scope = globalThis as Record<string, unknown>;
      return Response.json(Object.fromEntries(NODE_ONLY_GLOBALS.map((name) => [name, typeof scope[name]])));
    }
    if (request.method === "POST" && pathname === "/run") {
      const body = (await request.json()) as RunRequest;
      if (!CASE_NAMES.includes(body.case)) return Response.json({ error: `no case ${body.case}` }, { status: 404 });
      const started = Date.now();
      try {
        await portableSuite(lib, body.input)[body.case]();
        return Response.json({ ok: true, ms: Date.now() - started } satisfies RunResult);
      } catch (error) {
        const message =
          error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ""}` : String(error);
        return Response.json({ ok: false, ms: Date.now() - started, error: message } satisfies RunResult);
      }
    }
    return new Response("not found", { status: 404 });
  };
}
