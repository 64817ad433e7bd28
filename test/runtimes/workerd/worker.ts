/**
 * The worker that runs the portable suite in workerd. It is bundled by esbuild (see
 * test/runtimes/setup/workerd-script.ts) and runs as a plain Miniflare worker with no
 * compatibility flags, so no Node.js API exists in it (the vitest pool's own runner worker always
 * gets nodejs_compat, which would hide a Buffer or process use).
 */
import * as lib from "../edge-redlock.js";
import { suiteHandler } from "../suite-handler.js";

const handle = suiteHandler(lib);

export default {
  fetch: (request: Request): Promise<Response> => handle(request),
};
