/**
 * Extracts the TypeScript samples of a Markdown file (README.md, docs/*.md) and type-checks them with the TypeScript
 * compiler, each as its own module, the way a user's project would see this package: through its
 * name (`edge-redlock`, `edge-redlock/upstash`, `edge-redlock/hono`), its package.json `exports`
 * and the built types in dist/.
 *
 * A sample may be preceded by a hidden context, an HTML comment right above its fence:
 *
 *     <!-- sample-context
 *     declare function charge(options: { signal: AbortSignal }): Promise<{ paid: true }>;
 *     -->
 *
 * The context is prepended to the sample before checking (its declarations stand for the user's
 * own code: `charge`, `env`, …); readers see only the sample.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";

/** One fenced TypeScript block. */
export interface Sample {
  /** 1-based line of the block's first code line in the Markdown file. */
  readonly line: number;
  readonly code: string;
  /** Hidden context (declarations) from the comment above the fence, or "". */
  readonly context: string;
}

/** One compiler error, located in the Markdown file. */
export interface SampleError {
  /** Index of the sample in the list checked, or -1 for an error outside every sample. */
  readonly sample: number;
  readonly line: number;
  readonly message: string;
}

/** The module resolutions a user's project may use. */
export type Resolution = "bundler" | "nodenext";

/** An opening fence, indented or not (a block inside a list item is indented), and its language. */
const FENCE = /^( *)```(\w+)?\s*$/;
const CONTEXT_START = "<!-- sample-context";

/**
 * Every ```ts / ```typescript block of `markdown`, in order, with its hidden context. A block
 * indented in a list item loses that indentation.
 */
export function extractSamples(markdown: string): Sample[] {
  const lines = markdown.split("\n");
  const samples: Sample[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i] as string);
    if (!open) continue;
    const indent = open[1] as string;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^ *```\s*$/.test(lines[end] as string)) end++;
    if (open[2] === "ts" || open[2] === "typescript") {
      const code = lines.slice(start, end).map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line));
      samples.push({ line: start + 1, code: code.join("\n"), context: contextAbove(lines, i) });
    }
    i = end;
  }
  return samples;
}

/** The hidden context right above the fence at `fence` (blank lines allowed in between), or "". */
function contextAbove(lines: string[], fence: number): string {
  let close = fence - 1;
  while (close >= 0 && (lines[close] as string).trim() === "") close--;
  if (close < 0 || (lines[close] as string).trim() !== "-->") return "";
  let open = close - 1;
  while (open >= 0 && !(lines[open] as string).trimStart().startsWith(CONTEXT_START)) {
    if ((lines[open] as string).includes("-->")) return "";
    open--;
  }
  return open < 0 ? "" : lines.slice(open + 1, close).join("\n");
}

/**
 * Declarations standing in for packages a sample imports that this repository does not install
 * (the hosting platform's helpers). Kept to the signatures the samples use.
 */
const AMBIENT = `
declare module "@vercel/functions" {
  /** Extends the request's lifetime until the promise settles (Vercel's Edge/Node runtimes). */
  export function waitUntil(promise: Promise<unknown>): void;
}
`;

/**
 * Type-checks the samples under `resolution`, strict, each as its own ES module in a fresh
 * directory under `workRoot` (which must lie inside this package, so `edge-redlock` resolves to
 * the package itself through its `exports`, and its dependencies through its node_modules).
 * Returns the errors, located in the Markdown file.
 */
export function typeCheckSamples(samples: readonly Sample[], resolution: Resolution, workRoot: string): SampleError[] {
  const dir = join(workRoot, `${resolution}-${process.pid}-${Date.now().toString(36)}`);
  mkdirSync(dir, { recursive: true });
  try {
    const files = samples.map((sample, i) => {
      const file = join(dir, `sample-${i + 1}.ts`);
      // Deno's `npm:` specifier names the same npm package.
      const code = sample.code.replaceAll('"npm:edge-redlock', '"edge-redlock');
      // `export {}` keeps even a sample without imports a module (its own scope, top-level await).
      writeFileSync(file, `${sample.context}\n${code}\nexport {};\n`);
      return { file, sample, offset: sample.context === "" ? 1 : sample.context.split("\n").length + 1 };
    });
    const ambient = join(dir, "ambient.d.ts");
    writeFileSync(ambient, AMBIENT);
    const program = ts.createProgram([...files.map((f) => f.file), ambient], compilerOptions(resolution));
    return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
      const entry = files.find((f) => f.file === diagnostic.file?.fileName);
      if (!entry || diagnostic.file === undefined || diagnostic.start === undefined) {
        return { sample: -1, line: 0, message: `${diagnostic.file?.fileName ?? "(global)"}: ${message}` };
      }
      const sample = files.indexOf(entry);
      const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
      const inSample = line - entry.offset;
      return inSample < 0
        ? { sample, line: entry.sample.line, message: `(in the sample's hidden context) ${message}` }
        : { sample, line: entry.sample.line + inSample, message };
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function compilerOptions(resolution: Resolution): ts.CompilerOptions {
  return {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
    // Node's globals for the Node and Bun sample (`process`); nothing else from @types.
    types: ["node"],
    skipLibCheck: true,
    verbatimModuleSyntax: false,
    ...(resolution === "bundler"
      ? { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler }
      : { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext }),
  };
}
