/**
 * A client of the previous protocol, to run beside the current one as a gradual rollout does:
 * `src/` as of {@link PREVIOUS_COMMIT} (before one token per holder and the cluster fingerprint:
 * its releases pass a lock on with the same token, and it sends no cluster check), taken from the
 * git history and bundled into a temporary directory. A clone without that history gets the
 * current `src/` with the cluster check patched out instead, the one difference that decides
 * whether a client can be refused; `source` says which one was built.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";
import type { Redlock } from "../../../src/index.js";

/** The last commit of the previous protocol. */
export const PREVIOUS_COMMIT = "05aee0f";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

export interface PreviousProtocol {
  readonly Redlock: typeof Redlock;
  readonly source: "history" | "patched";
  dispose(): void;
}

/** Build and load the previous protocol's client. */
export async function loadPreviousProtocol(): Promise<PreviousProtocol> {
  const dir = mkdtempSync(join(tmpdir(), "edge-redlock-previous-"));
  try {
    const source = extract(dir);
    const file = join(dir, "previous.mjs");
    await build({
      entryPoints: [join(dir, "src", "index.ts")],
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      outfile: file,
      logLevel: "error",
    });
    const module = (await import(pathToFileURL(file).href)) as { Redlock: typeof Redlock };
    return { Redlock: module.Redlock, source, dispose: () => rmSync(dir, { recursive: true, force: true }) };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

function extract(dir: string): "history" | "patched" {
  let archive: Buffer | undefined;
  try {
    archive = execFileSync("git", ["-C", repoRoot, "archive", "--format=tar", PREVIOUS_COMMIT, "src"], {
      stdio: ["ignore", "pipe", "ignore"],
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch {
    archive = undefined;
  }
  if (archive !== undefined) {
    execFileSync("tar", ["-x", "-C", dir], { input: archive });
    return "history";
  }
  cpSync(join(repoRoot, "src"), join(dir, "src"), { recursive: true });
  const path = join(dir, "src", "cluster.ts");
  const text = readFileSync(path, "utf8");
  const target = "const checking = this.#check(o, signal);";
  if (text.split(target).length !== 2) {
    throw new Error(`patch target not found exactly once in src/cluster.ts: ${target}; update ${import.meta.url}`);
  }
  writeFileSync(path, text.replace(target, "const checking = undefined as Promise<void> | undefined;"));
  return "patched";
}
