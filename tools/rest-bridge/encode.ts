/**
 * A reply as it comes out of ioredis with Buffer replies and no reply transformers (RESP2):
 * bulk and status strings are Buffers, integers are numbers, nil is null, arrays nest, and an
 * error nested in an array (a Lua `redis.error_reply` inside a table, or a failed command inside
 * EXEC) is an Error.
 */
export type RedisReply = Buffer | number | null | Error | RedisReply[];

/** A `result` value in an Upstash REST response. */
export type JsonValue = string | number | null | JsonValue[];

/**
 * Converts a Redis reply to the JSON `result` of the Upstash REST protocol.
 *
 * With `base64` (the client sent `Upstash-Encoding: base64`) EVERY string is base64-encoded,
 * including "OK" and including strings nested in arrays. That is what `@upstash/redis` decodes
 * correctly: its decoder keeps a top-level "OK" but base64-decodes every string inside an array,
 * so a plain "OK" inside an array would turn into "8" (reference §2.4). Integers and null are
 * never encoded. Without `base64` bulk strings are decoded as UTF-8, like Upstash does.
 */
export function encodeReply(reply: RedisReply, base64: boolean): JsonValue {
  if (reply === null || typeof reply === "number") return reply;
  if (Buffer.isBuffer(reply)) return base64 ? reply.toString("base64") : reply.toString("utf8");
  if (Array.isArray(reply)) return reply.map((item) => encodeReply(item, base64));
  if (reply instanceof Error) {
    // Only reachable for an error nested inside an array; top-level errors become {"error": …}
    // before this function is called. Represent it as its message, like redis-cli does.
    return encodeReply(Buffer.from(reply.message, "utf8"), base64);
  }
  throw new Error(`unexpected Redis reply type: ${Object.prototype.toString.call(reply)}`);
}
