/**
 * Builds the client process: `client.ts` bundled with the library under test into one CommonJS
 * file (fast to start, several times per scenario). The library is `src/` as it is, or a patched
 * copy of it for the negative controls that need a broken build:
 * - `defect-extension`: the shortened-extension defect re-introduced (an extension may only move
 *   the deadline later), which checker 2 must report;
 * - `broken-release`: a release script that deletes the key without comparing the token, which
 *   checker 3 must report.
 * A patch that no longer matches the source fails loudly instead of building an unpatched copy.
 * @module
 */
import { createHash } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Plugin } from "esbuild";

/** Which library the clients run. */
export type BuildVariant = "src" | "defect-extension" | "broken-release";

/** A built client. */
export interface ClientBuild {
  readonly variant: BuildVariant;
  /** Path of the bundled client entry. */
  readonly file: string;
  /** Removes the temporary directory. */
  dispose(): void;
}

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, "../..");
const srcDir = join(repoRoot, "src");

/** A textual patch of one file of a copy of `src/`. */
interface Patch {
  readonly file: string;
  readonly apply: (text: string) => string;
}

/** The patches of each variant. */
export const PATCHES: Readonly<Record<Exclude<BuildVariant, "src">, readonly Patch[]>> = {
  "defect-extension": [
    {
      file: "lock.ts",
      apply: (text) =>
        replaceOnce(
          text,
          /(extended\(deadline: number(?:, ttlMs: number)?\): void \{[^}]*?)this\.#deadline = deadline;/,
          "$1if (deadline > this.#deadline) this.#deadline = deadline;",
          "lock.ts: `this.#deadline = deadline;` inside extended()",
        ),
    },
  ],
  "broken-release": [
    {
      file: "scripts/release.ts",
      apply: (text) => {
        const patched = replaceOnce(
          text,
          /if redis\.call\("GET", key\) == ARGV\[1\] then/,
          "if true then",
          'scripts/release.ts: the `redis.call("GET", key) == ARGV[1]` comparison',
        );
        const source = /source: `([^`]*)`/.exec(patched)?.[1];
        if (source === undefined) throw new Error("broken-release patch: no script source found in scripts/release.ts");
        const sha1 = createHash("sha1").update(source).digest("hex");
        return replaceOnce(patched, /sha1: "[0-9a-f]{40}"/, `sha1: "${sha1}"`, "scripts/release.ts: sha1");
      },
    },
  ],
};

/** `text.replace(pattern, replacement)`, throwing when the pattern does not match exactly once. */
export function replaceOnce(text: string, pattern: RegExp, replacement: string, what: string): string {
  const global = new RegExp(pattern.source, pattern.flags.includes("g") ? pattern.flags : `${pattern.flags}g`);
  const matches = text.match(global)?.length ?? 0;
  if (matches !== 1) {
    throw new Error(`patch target not found exactly once (found ${matches}): ${what}. Update tools/chaos/build.ts.`);
  }
  return text.replace(pattern, replacement);
}

/** Bundles the client for a variant into a fresh temporary directory. */
export async function buildClient(variant: BuildVariant): Promise<ClientBuild> {
  const dir = mkdtempSync(join(tmpdir(), "edge-redlock-chaos-build-"));
  try {
    let libraryDir = srcDir;
    if (variant !== "src") {
      libraryDir = join(dir, "src");
      cpSync(srcDir, libraryDir, { recursive: true });
      for (const patch of PATCHES[variant]) {
        const path = join(libraryDir, patch.file);
        writeFileSync(path, patch.apply(readFileSync(path, "utf8")));
      }
    }
    const file = join(dir, "client.cjs");
    await build({
      entryPoints: [join(here, "client.ts")],
      bundle: true,
      platform: "node",
      format: "cjs",
      target: "node20",
      outfile: file,
      logLevel: "error",
      plugins: [redirectLibrary(libraryDir)],
    });
    return { variant, file, dispose: () => rmSync(dir, { recursive: true, force: true }) };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/** Resolves imports of `src/…` from the harness to the same file in `libraryDir`. */
function redirectLibrary(libraryDir: string): Plugin {
  return {
    name: "library-under-test",
    setup(b) {
      b.onResolve({ filter: /^\.\.?\// }, (args) => {
        const target = resolve(args.resolveDir, args.path);
        const rel = relative(srcDir, target);
        if (rel.startsWith("..") || libraryDir === srcDir) return undefined;
        return { path: join(libraryDir, rel).replace(/\.js$/, ".ts") };
      });
    },
  };
}
