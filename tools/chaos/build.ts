/**
 * Builds the client process: `client.ts` bundled with the library under test into one CommonJS
 * file (fast to start, several times per scenario). The library is `src/` as it is, or a patched
 * copy of it for the negative controls that need a broken build:
 * - `defect-extension`: the shortened-extension defect re-introduced (an extension may only move
 *   the deadline later), which checker 2 must report;
 * - `broken-release`: a release script that deletes the key without comparing the token, which
 *   checker 3 must report;
 * - `shared-token`: a hand-over that leaves the keys with the releasing holder's token (the
 *   pass-on's hazard: two holders, one token), which checker 2 must report;
 * - `display-id`: the isolate's state shared by clients whose nodes have the same display ids;
 * - `newline-hot-key`: the isolate's name of a resource set joined by "\n" (`["a", "b"]` is then
 *   `"a\nb"`), and a release that takes up any offer filed under its name: C1 and C2 must report
 *   both (see `scenarios-misuse.ts`).
 * A patch that no longer matches the source fails loudly instead of building an unpatched copy;
 * where the source has had more than one shape, a patch lists each, and the first that matches
 * applies.
 * @module
 */
import { createHash } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Plugin } from "esbuild";

/** Which library the clients run. */
export type BuildVariant =
  | "src"
  | "defect-extension"
  | "broken-release"
  | "shared-token"
  | "display-id"
  | "newline-hot-key";

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
      file: "core/lock.ts",
      apply: (text) => {
        // An extension may only move the deadline later...
        const later = replaceOnce(
          text,
          /(extended\(number: number, startedAt: number, ttlMs: number\): void \{[\s\S]*?)this\.#deadline = deadline;/,
          "$1if (deadline > this.#deadline) this.#deadline = deadline;",
          "lock.ts: `this.#deadline = deadline;` inside extended()",
        );
        // ...and an extension on its way no longer caps the claim at what it may set.
        return replaceOnce(
          later,
          /\n\s*this\.capDeadline\(extensionDeadline\(sent, \[\], [^;]*\);/,
          "",
          "lock.ts: the cap inside extensionStarted()",
        );
      },
    },
  ],
  "broken-release": [
    {
      file: "core/scripts/release.ts",
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
  "shared-token": [
    {
      file: "waiting/release.ts",
      apply: (text) => {
        // The other nodes: the hand-over script compares the releasing holder's token and "sets"
        // the next holder's, which is now that same token.
        const others = replaceOneOf(
          text,
          [
            {
              pattern: /handOverOnNode\(\s*engine\.node\(i\),\s*keys,\s*token,\s*handoff\.offer,\s*context\s*\)/,
              replacement: "handOverOnNode(engine.node(i), keys, token, { ...handoff.offer, token }, context)",
            },
          ],
          "waiting/release.ts: handOverOnNode(engine.node(i), keys, token, handoff.offer, context)",
        );
        // The gate node: its release script hands the keys over with `next.token`.
        return replaceOneOf(
          others,
          [
            {
              pattern:
                /releaseOnGate\(\s*engine\.node\((i|gate)\),\s*keys,\s*token,\s*hold,\s*context,\s*requeue,\s*next\s*\)/,
              replacement:
                "releaseOnGate(engine.node($1), keys, token, hold, context, requeue, next && { ...next, token })",
            },
            // Before the pass-on was removed: `to.token` was the waiter's unless passing on.
            { pattern: /token: passOn === undefined \? next\.token : token,/, replacement: "token: token," },
          ],
          "waiting/release.ts: the next holder's token in releaseOnGate's `next`",
        );
      },
    },
  ],
  "display-id": [
    {
      file: "core/identity.ts",
      apply: (text) =>
        replaceOneOf(
          text,
          [
            {
              pattern: /export function nodeIdentity\(\s*(\w+)([^)]*)\)([^{]*)\{[\s\S]*?\n\}/,
              replacement: (_match, node, params, returns) =>
                `export function nodeIdentity(${node}${params})${returns}{\n  return \`rest \${${node}.id}\`;\n}`,
            },
          ],
          "core/identity.ts: the body of nodeIdentity(node, config)",
        ),
    },
  ],
  "newline-hot-key": [
    {
      file: "waiting/gate.ts",
      apply: (text) =>
        replaceOneOf(
          text,
          [
            {
              pattern: /export function hotKeyOf\(\s*(\w+)([^)]*)\)([^{]*)\{[\s\S]*?\n\}/,
              replacement: (_match, keys, params, returns) =>
                `export function hotKeyOf(${keys}${params})${returns}{\n  return ${keys}.join("\\n");\n}`,
            },
          ],
          "gate.ts: the body of hotKeyOf(keys)",
        ),
    },
    {
      // A release takes up only an offer for exactly its keys: a second layer, which must go too
      // for the collision to reach a grant (before that check existed, there is nothing to remove).
      file: "isolate/hot-resources.ts",
      apply: (text) =>
        replaceOneOf(
          text,
          [
            { pattern: /\s*\|\|\s*!sameKeys\(offer\.keys,\s*keys\)/, replacement: "" },
            { pattern: /claimHandoff\(key: string\): HandoffOffer \| undefined \{/, replacement: "$&" },
          ],
          "hot-resources.ts: claimHandoff's check of the offer's keys",
        ),
    },
  ],
};

/** One shape of a patch target, and what replaces it (a string with `$1`…, or a function of the match). */
export interface Alternative {
  readonly pattern: RegExp;
  readonly replacement: string | ((match: string, ...groups: string[]) => string);
}

/**
 * The first alternative whose pattern matches exactly once, applied; throws when none does (each
 * alternative is one shape the source has had: the patch follows the code across a rewrite).
 */
export function replaceOneOf(text: string, alternatives: readonly Alternative[], what: string): string {
  for (const { pattern, replacement } of alternatives) {
    const global = new RegExp(pattern.source, pattern.flags.includes("g") ? pattern.flags : `${pattern.flags}g`);
    if ((text.match(global)?.length ?? 0) === 1) {
      return typeof replacement === "string" ? text.replace(pattern, replacement) : text.replace(pattern, replacement);
    }
  }
  throw new Error(
    `patch target not found exactly once in any of its ${alternatives.length} known shapes: ${what}. Update tools/chaos/build.ts.`,
  );
}

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
