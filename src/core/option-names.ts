/**
 * Refusing option names this version does not know, with the closest valid one in the message.
 * @module
 */
import { InvalidArgumentError } from "../base/errors.js";
import { OPTION_NAMES, type RedlockOptions } from "./options.js";

/**
 * Refuse option names this version does not know (a typo such as `retryDelayMs`, or an option of
 * a later version), naming the closest valid one. Silently ignoring them would leave the caller
 * believing a setting is in force.
 * @param allowed names accepted besides {@link OPTION_NAMES} (e.g. `nodes`, `signal`).
 */
export function checkOptionNames(
  options: object,
  where: string,
  allowed: readonly string[],
  makeError: (message: string) => Error,
): void {
  const valid = [...OPTION_NAMES, ...allowed];
  for (const name of Object.keys(options)) {
    if (valid.includes(name)) continue;
    const instead = FROM_OTHER_LIBRARIES[name];
    if (instead !== undefined) throw makeError(`unknown option ${JSON.stringify(name)} in ${where}: ${instead}`);
    const closest = closestName(name, valid);
    throw makeError(
      `unknown option ${JSON.stringify(name)} in ${where}${closest ? `; did you mean ${JSON.stringify(closest)}?` : ""}`,
    );
  }
}

/**
 * Options of node-redlock (v5, @sesamecare-oss/redlock) and @upstash/lock that users bring along,
 * and what to write instead (docs/migrating-from-node-redlock.md, docs/migrating-from-upstash-lock.md).
 */
const FROM_OTHER_LIBRARIES: Readonly<Record<string, string>> = {
  retryCount: "write maxAttempts (attempts in all: retryCount + 1)",
  retryJitter: "write retryDelay: () => ms, a function",
  automaticExtensionThreshold: "write autoExtendThreshold, a fraction of the TTL",
  lease: "the lease is the ttlMs argument",
  retry: "write maxAttempts, and retryDelay: () => ms for a fixed delay",
  redis: "write nodes: [{ url, token }, …]",
};

/** The valid name nearest to `name` by edit distance, when it is plausibly a typo of it. */
function closestName(name: string, valid: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of valid) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  // A shared stem (retryDelayMs / retryDelay) or a few edits away.
  const lower = name.toLowerCase();
  const prefixMatch = valid.find((c) => lower.startsWith(c.toLowerCase()) || c.toLowerCase().startsWith(lower));
  if (prefixMatch !== undefined && bestDistance > 2) return prefixMatch;
  return bestDistance <= Math.max(2, Math.floor(name.length / 3)) ? best : undefined;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current[j] = Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, substitution);
    }
    previous = current;
  }
  return previous[b.length] as number;
}

/** Check a call's option names; `undefined` for none, so the per-TTL cache applies. */
export function callOptions(options: RedlockOptions | undefined, where: string): RedlockOptions | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== "object" || options === null) {
    throw new InvalidArgumentError(`the options of ${where} must be an object`);
  }
  checkOptionNames(options, where, [], (m) => new InvalidArgumentError(m));
  return isEmpty(options) ? undefined : options;
}

function isEmpty(object: object | undefined): boolean {
  if (object === undefined) return true;
  for (const _ in object) return false;
  return true;
}

/** What an acquire call carries besides overrides of the client's options (see `AcquireOptions`, `UsingOptions`). */
interface CallExtras {
  signal?: AbortSignal | undefined;
  waitUntil?: ((promise: Promise<unknown>) => void) | undefined;
}

/** What a call without options gives: one frozen object, not a new one per call. */
const NO_CALL_INPUT: CallExtras & { overrides?: RedlockOptions | undefined } = Object.freeze({});

/**
 * An acquire call's options split into its signal, its `waitUntil` (allowed when `extra` names
 * it, as for `using()`) and the overrides of the client's options (`undefined` when none), each
 * checked; nothing is sent.
 * @throws {InvalidArgumentError}
 */
export function callInput(
  options: (RedlockOptions & CallExtras) | undefined,
  where: string,
  extra: readonly string[] = [],
): CallExtras & { overrides?: RedlockOptions | undefined } {
  if (options === undefined) return NO_CALL_INPUT;
  if (typeof options !== "object" || options === null) {
    throw new InvalidArgumentError(`the options of ${where} must be an object`);
  }
  checkOptionNames(options, where, ["signal", ...extra], (m) => new InvalidArgumentError(m));
  const { signal, waitUntil, ...overrides } = options;
  // Duck-typed: a signal from another realm (a VM sandbox) fails `instanceof`.
  if (signal !== undefined && typeof (signal as Partial<AbortSignal>)?.addEventListener !== "function") {
    throw new InvalidArgumentError(`the signal of ${where} must be an AbortSignal`);
  }
  if (waitUntil !== undefined && typeof waitUntil !== "function") {
    throw new InvalidArgumentError(`the waitUntil of ${where} must be a function`);
  }
  return { signal, waitUntil, overrides: isEmpty(overrides) ? undefined : overrides };
}
