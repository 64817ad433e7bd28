import { spawnSync } from "node:child_process";
import { accessSync, constants, realpathSync, statSync } from "node:fs";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Finds an executable on PATH, like `command -v`. Returns its path, or undefined.
 */
export function findExecutable(name: string): string | undefined {
  const extensions = process.platform === "win32" ? ["", ".exe", ".cmd"] : [""];
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    for (const ext of extensions) {
      const candidate = join(dir, name + ext);
      try {
        if (!statSync(candidate).isFile()) continue;
        accessSync(candidate, constants.X_OK);
        return candidate;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

/** A one-line instruction to install redis-server on this platform. */
export function installHint(): string {
  const prefix = "redis-server not found on PATH (or set REDIS_SERVER_BIN). Install it:";
  switch (process.platform) {
    case "darwin":
      return `${prefix} brew install redis`;
    case "win32":
      return `${prefix} use WSL (sudo apt-get install redis-server) or a Redis-compatible server such as Memurai`;
    case "linux":
      if (findExecutable("apt-get")) return `${prefix} sudo apt-get install redis-server`;
      if (findExecutable("dnf")) return `${prefix} sudo dnf install redis`;
      if (findExecutable("yum")) return `${prefix} sudo yum install redis`;
      if (findExecutable("apk")) return `${prefix} sudo apk add redis`;
      if (findExecutable("pacman")) return `${prefix} sudo pacman -S redis`;
      if (findExecutable("zypper")) return `${prefix} sudo zypper install redis`;
      return `${prefix} use your distribution's redis package, or build it from https://redis.io/download`;
    default:
      return `${prefix} see https://redis.io/docs/latest/operate/oss_and_stack/install/`;
  }
}

/** Options of {@link ensureRedisServer}. */
export interface EnsureRedisOptions {
  /** Where progress messages go. Default: stderr. */
  log?: (message: string) => void;
  /** Allow installing with apt-get when running as root. Default true. */
  install?: boolean;
}

/**
 * Returns the path of redis-server, installing it first when possible.
 *
 * Order: `REDIS_SERVER_BIN` if set, then PATH. When missing and the process runs as root on a
 * system with apt-get (CI containers), it runs `apt-get update && apt-get install -y redis-server`.
 * Otherwise it throws an Error whose message is a one-line install instruction for the platform.
 */
export function ensureRedisServer(options: EnsureRedisOptions = {}): string {
  const log = options.log ?? ((message: string) => process.stderr.write(`${message}\n`));
  const override = process.env.REDIS_SERVER_BIN;
  if (override) return override;

  const found = findExecutable("redis-server");
  if (found) return found;

  const isRoot = process.getuid?.() === 0;
  if ((options.install ?? true) && isRoot && findExecutable("apt-get")) {
    log("redis-server not found: installing it with apt-get");
    const result = spawnSync(
      "sh",
      ["-c", "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server"],
      { stdio: ["ignore", "inherit", "inherit"] },
    );
    const installed = findExecutable("redis-server");
    if (result.status === 0 && installed) return installed;
    throw new Error(`apt-get did not provide redis-server (exit status ${result.status}). ${installHint()}`);
  }
  throw new Error(installHint());
}

/** The version line of a redis-server binary, e.g. "Redis server v=7.0.15 sha=…". */
export function redisServerVersion(binary: string): string {
  const result = spawnSync(binary, ["--version"], { encoding: "utf8" });
  if (result.status !== 0) throw new Error(`${binary} --version failed: ${result.stderr || result.error}`);
  return result.stdout.trim();
}

function isMainModule(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

// CLI: `tsx tools/nodes/ensure-redis.ts` prints the binary and its version, or exits 1 with the
// install instruction. Meant for CI scripts and demos.
if (isMainModule()) {
  try {
    const binary = ensureRedisServer();
    process.stdout.write(`${binary}\n${redisServerVersion(binary)}\n`);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(1);
  }
}
