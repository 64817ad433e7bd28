/**
 * The links of the README and of docs/*.md, checked where users read them. The README is read on
 * npm, where only what the package ships exists (dist/, README.md, package.json): a relative link
 * there is dead, so every README link is absolute or an anchor of the README itself. The docs are
 * read in the repository: their relative links must name files that exist, and an anchor a
 * heading that exists. An absolute link into this package's own repository (package.json
 * `repository`) must name a file of this checkout.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";

/** A Markdown file to check: its path from the repository root, and its text. */
export interface MarkdownFile {
  readonly path: string;
  readonly text: string;
}

/** Every `[text](target)` link outside code, with its 1-based line. */
export function linksOf(markdown: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  let inFence = false;
  markdown.split("\n").forEach((line, index) => {
    if (/^ *```/.test(line)) inFence = !inFence;
    if (inFence) return;
    // Inline code spans may hold brackets that are no link.
    const text = line.replace(/`[^`]*`/g, "``");
    for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) links.push({ line: index + 1, target: match[1] as string });
  });
  return links;
}

/** The anchors GitHub gives the headings of `markdown` (lowercase, punctuation dropped, spaces as hyphens). */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let inFence = false;
  for (const line of markdown.split("\n")) {
    if (/^ *```/.test(line)) inFence = !inFence;
    const heading = inFence ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (!heading) continue;
    const base = (heading[1] as string)
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** `git+https://github.com/o/r.git` → `https://github.com/o/r`. */
export function repositoryUrl(packageJson: { repository?: { url?: string } | string }): string {
  const raw = typeof packageJson.repository === "string" ? packageJson.repository : packageJson.repository?.url;
  if (raw === undefined) throw new Error("package.json has no repository");
  return raw.replace(/^git\+/, "").replace(/\.git$/, "");
}

/**
 * The broken links of `files`, as `path:line: problem`. `root` is the repository checkout; `repo`
 * the repository's URL (see {@link repositoryUrl}).
 */
export function brokenLinks(files: readonly MarkdownFile[], root: string, repo: string): string[] {
  const problems: string[] = [];
  const anchorsOf = (path: string): Set<string> | undefined => {
    const known = files.find((f) => f.path === path);
    if (known) return headingAnchors(known.text);
    return existsSync(join(root, path)) ? headingAnchors(readFileSync(join(root, path), "utf8")) : undefined;
  };
  /** Checks that `path` (from the root) exists and, for Markdown, that it has `anchor`. */
  const resolve = (where: string, path: string, anchor: string | undefined) => {
    if (!files.some((f) => f.path === path) && !existsSync(join(root, path))) {
      problems.push(`${where}: ${path} does not exist`);
      return;
    }
    if (anchor !== undefined && path.endsWith(".md") && !anchorsOf(path)?.has(anchor)) {
      problems.push(`${where}: ${path} has no heading #${anchor}`);
    }
  };
  const own = `${repo}/blob/main/`;
  for (const file of files) {
    for (const { line, target } of linksOf(file.text)) {
      const where = `${file.path}:${line}`;
      const [pathPart, anchor] = target.split("#", 2) as [string, string | undefined];
      if (target.startsWith(own)) resolve(where, pathPart.slice(own.length), anchor);
      else if (/^[a-z]+:/i.test(target)) continue;
      else if (pathPart === "") resolve(where, file.path, anchor);
      else if (file.path === "README.md") problems.push(`${where}: relative link ${target} is dead on npm`);
      else resolve(where, normalize(join(dirname(file.path), pathPart)), anchor);
    }
  }
  return problems;
}
