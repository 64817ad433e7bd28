/**
 * The shape of `src/`: layers whose imports point one way (the core never imports waiting,
 * in-isolate coordination or fencing, so that a bundle without them carries none of their code),
 * no import cycle, type-only imports included (a cycle makes the algorithm impossible to read in
 * one direction, and ties modules that a bundler could otherwise drop), and no file far over the
 * size the style asks for. See docs/architecture.md.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../src");

/** Every `.ts` file below `dir`, as paths relative to `src/`. */
function sources(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") ? [relative(SRC, path)] : [];
  });
}

/** The relative modules a file imports or re-exports, type-only ones included, as paths relative to `src/`. */
function importsOf(file: string, text: string): string[] {
  const found = new Set<string>();
  // `import … from "…"`, `export … from "…"`, a bare `import "…"` (for its effects) and `import("…")`.
  const pattern =
    /(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s*"(\.{1,2}\/[^"]+)"|(?:^|\n)\s*import\s*"(\.{1,2}\/[^"]+)"|\bimport\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g;
  for (const match of text.matchAll(pattern)) {
    const target = (match[1] ?? match[2] ?? match[3]) as string;
    found.add(relative(SRC, resolve(SRC, dirname(file), target)).replace(/\.js$/, ".ts"));
  }
  return [...found];
}

/** The import cycles of a graph (its strongly connected components of more than one file, or a file importing itself). */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node) as number, low.get(next) as number));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node) as number, index.get(next) as number));
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    for (;;) {
      const member = stack.pop() as string;
      onStack.delete(member);
      component.push(member);
      if (member === node) break;
    }
    if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

/**
 * What each folder of `src/` may import besides itself. Files at the top of `src/` are the entries
 * that assemble the layers, and may import any.
 */
const LAYERS: Readonly<Record<string, readonly string[]>> = {
  base: [],
  transport: ["base"],
  core: ["base", "transport"],
  isolate: ["base", "transport", "core"],
  waiting: ["base", "transport", "core", "isolate"],
  fencing: ["base", "transport", "core"],
  upstash: ["base", "transport"],
  hono: ["base", "transport", "core"],
  preflight: ["base", "transport", "core"],
  otel: ["base", "core"],
  primitives: ["base", "transport", "core"],
  testing: ["base", "transport", "core", "isolate", "waiting", "fencing", "primitives"],
};

/** The imports that break the layering: `from → to` for each. */
function layerViolations(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const folderOf = (file: string) => (file.includes("/") ? (file.split("/")[0] as string) : undefined);
  const found: string[] = [];
  for (const [file, imports] of graph) {
    const from = folderOf(file);
    if (from === undefined) continue;
    const allowed = LAYERS[from];
    for (const target of imports) {
      const to = folderOf(target);
      if (to === from) continue;
      if (allowed === undefined || to === undefined || !allowed.includes(to)) found.push(`${file} → ${target}`);
    }
  }
  return found;
}

describe("src/ has a shape you can read in one direction", () => {
  const files = sources();
  const graph = new Map(files.map((file) => [file, importsOf(file, readFileSync(join(SRC, file), "utf8"))]));

  it("reads the imports of every file (type-only and re-exports included)", () => {
    expect(files.length).toBeGreaterThan(40);
    expect(graph.get("redlock.ts")).toContain("core/redlock.ts");
    expect(graph.get("core/lock.ts")).toContain("base/errors.ts");
    // `import type` counts: a cycle through types still ties the files together.
    expect(importsOf("a/b.ts", 'import type { X } from "../c.js";\nexport { Y } from "./d.js";')).toEqual([
      "c.ts",
      "a/d.ts",
    ]);
    // An import for its effects alone counts too: it runs the module, and ties the files together.
    expect(importsOf("a/b.ts", 'import "../e.js";\nimport("./f.js");')).toEqual(["e.ts", "a/f.ts"]);
  });

  it("has every folder in a layer", () => {
    const folders = new Set(files.filter((f) => f.includes("/")).map((f) => f.split("/")[0]));
    expect([...folders].sort()).toEqual(Object.keys(LAYERS).sort());
  });

  it("points every import one way: the core imports none of waiting, isolate or fencing", () => {
    expect(layerViolations(graph)).toEqual([]);
  });

  it("negative control: the layer check reports a core module importing waiting or fencing, type-only included", () => {
    const broken = new Map(graph);
    broken.set("core/lock.ts", [
      ...(graph.get("core/lock.ts") ?? []),
      ...importsOf("core/lock.ts", 'import type { Waiter } from "../waiting/state.js";'),
    ]);
    broken.set("core/engine.ts", [
      ...(graph.get("core/engine.ts") ?? []),
      ...importsOf("core/engine.ts", 'import { fencing } from "../fencing/index.js";'),
    ]);
    broken.set("base/errors.ts", [...(graph.get("base/errors.ts") ?? []), "core/lock.ts"]);
    expect(layerViolations(broken).sort()).toEqual([
      "base/errors.ts → core/lock.ts",
      "core/engine.ts → fencing/index.ts",
      "core/lock.ts → waiting/state.ts",
    ]);
  });

  it("keeps the testing module out of every other entry and layer: only `edge-redlock/testing` carries it", () => {
    const importers = [...graph]
      .filter(([file, imports]) => !file.startsWith("testing/") && imports.some((to) => to.startsWith("testing/")))
      .map(([file]) => file);
    expect(graph.get("testing/index.ts")?.length).toBeGreaterThan(0);
    expect(importers).toEqual([]);
  });

  it("has no import cycle", () => {
    expect(cycles(graph)).toEqual([]);
  });

  it("negative control: the cycle finder reports a cycle through a type-only import", () => {
    const withCycle = new Map([
      ["lock.ts", importsOf("lock.ts", 'import type { AcquireFan } from "./operations/cleanup.js";')],
      ["operations/cleanup.ts", importsOf("operations/cleanup.ts", 'import { Lock } from "../lock.js";')],
      ["quorum.ts", []],
    ]);
    expect(cycles(withCycle)).toEqual([["lock.ts", "operations/cleanup.ts"]]);
  });

  it("keeps every file under about 450 lines", () => {
    const long = files
      .map((file) => ({ file, lines: readFileSync(join(SRC, file), "utf8").split("\n").length }))
      .filter(({ lines }) => lines > 460);
    expect(long).toEqual([]);
  });
});
