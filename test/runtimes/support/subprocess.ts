/**
 * Runs another runtime's test command from a vitest test (in Node) and reads its per-case results.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `command` in the repository root; kills it (by its PID) after `timeoutMs`. */
export function run(
  command: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs: number,
): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** One case's result as another runtime reported it. */
export interface CaseResult {
  ok: boolean;
  /** The failure, as the runtime printed it. */
  detail: string;
}

/** Parses TAP 14 (`deno test --reporter=tap`): `ok N - name` / `not ok N - name` with a YAML-ish block. */
export function parseTap(output: string): Map<string, CaseResult> {
  const results = new Map<string, CaseResult>();
  const lines = output.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const match = /^(ok|not ok) \d+ - (.*)$/.exec(lines[i]!);
    if (!match) continue;
    const detail: string[] = [];
    if (lines[i + 1]?.trim() === "---") {
      for (i += 2; i < lines.length && lines[i]!.trim() !== "..."; i++) detail.push(lines[i]!);
    }
    results.set(match[2]!, { ok: match[1] === "ok", detail: readableTapDetail(detail.join("\n")) });
  }
  return results;
}

function readableTapDetail(block: string): string {
  try {
    const parsed = JSON.parse(block) as { message?: string };
    return parsed.message ?? block;
  } catch {
    return block;
  }
}

/** Parses `bun test`'s console output: `(pass) name [1.00ms]` / `(fail) name`, the error printed before it. */
export function parseBun(output: string): Map<string, CaseResult> {
  const results = new Map<string, CaseResult>();
  let pending: string[] = [];
  for (const line of output.split("\n")) {
    const match = /^\((pass|fail)\) (.*?)(?: \[[\d.]+m?s\])?$/.exec(line);
    if (!match) {
      pending.push(line);
      continue;
    }
    results.set(match[2]!, { ok: match[1] === "pass", detail: pending.join("\n").trim() });
    pending = [];
  }
  return results;
}
