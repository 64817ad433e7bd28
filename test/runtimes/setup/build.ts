/**
 * vitest globalSetup of the runtime and packaging projects: `npm run build`, once per vitest run,
 * before any of their tests. Those projects test dist/ as users get it, so dist/ must be built
 * from the current src/ (a stale dist/ would test yesterday's code). A globalSetup rather than a
 * `pretest` script: `npx vitest --project runtime-deno` builds too, and `--project unit` does not.
 * Several projects list this setup; they share one build through a promise on globalThis (all
 * globalSetups run in the one vitest main process).
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const KEY = Symbol.for("edge-redlock.test.runtimes.build");

export default async function setup(): Promise<void> {
  const shared = globalThis as { [KEY]?: Promise<void> };
  shared[KEY] ??= build();
  await shared[KEY];
}

function build(): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile("npm", ["run", "build", "--silent"], { cwd: ROOT, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`npm run build failed (exit ${error.code}):\n${stdout}\n${stderr}`));
      else resolve();
    });
  });
}
