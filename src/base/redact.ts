/**
 * Keeping secrets out of error messages: a node's REST token, a URL's password and lock tokens
 * must never reach a log line, whatever a node or a proxy echoes back.
 * @module
 */

const REDACTED = "[redacted]";
/** Shorter strings are not treated as secrets: replacing them would mangle ordinary words. */
const MIN_SECRET_LENGTH = 8;

/** Replace every occurrence of each secret in `text`. */
export function redact(text: string, secrets: readonly unknown[]): string {
  let out = text;
  for (const secret of secrets) {
    if (typeof secret === "string" && secret.length >= MIN_SECRET_LENGTH) out = out.split(secret).join(REDACTED);
  }
  return out;
}

/**
 * The secrets a command may carry: every string argument long enough to be a token (lock
 * tokens, script bodies are harmless but long, so they are redacted too: that costs nothing).
 */
export function commandSecrets(args: readonly unknown[]): string[] {
  return args.filter((a): a is string => typeof a === "string" && a.length >= MIN_SECRET_LENGTH);
}

/** A short, secret-free description of a body we could not use, instead of echoing it. */
export function describeBody(text: string): string {
  const trimmed = text.trim();
  if (trimmed.length === 0) return "an empty body";
  const kind = /^<(!doctype|html)/i.test(trimmed) ? "an HTML page" : "a body that is not a JSON reply";
  return `${kind} of ${text.length} characters`;
}

/**
 * A secret-free description of a Redis reply of the wrong shape: its type and size, never its
 * content (a proxy that reflects the request into a well-formed reply would otherwise put the
 * REST token or a lock token into the message).
 */
export function describeReply(reply: unknown): string {
  if (reply === null) return "null";
  if (Array.isArray(reply)) return `an array of ${reply.length} elements`;
  if (typeof reply === "string") return `a string of ${reply.length} characters`;
  if (typeof reply === "number") return Number.isInteger(reply) ? "an integer" : "a number";
  return `a value of type ${typeof reply}`;
}
