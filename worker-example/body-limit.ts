/**
 * A request body limit that refuses an oversized body before it is held in memory or parsed.
 *
 * A body with a declared length over the limit is refused unread. A streamed (chunked) body is
 * read up to the limit; past it, the rest is read and discarded (up to {@link DRAIN_LIMIT_BYTES})
 * before the 413 goes out. Hono's `bodyLimit` leaves that rest unread, and under `wrangler dev`
 * the next request on the same connection then failed (cancelling the body did not help).
 */
import type { MiddlewareHandler } from "hono";

/** How much of a refused streamed body is discarded so its connection stays usable; past it, the body is cancelled. */
export const DRAIN_LIMIT_BYTES = 1024 * 1024;

/**
 * @param maxBytes - the largest accepted body, in bytes.
 * @param tooLarge - builds the error thrown for a larger body (the app's error handler answers it).
 */
export function limitBody(maxBytes: number, tooLarge: () => Error): MiddlewareHandler {
  return async (c, next) => {
    const body = c.req.raw.body;
    if (!body) return next();
    const declared = c.req.raw.headers.get("content-length");
    if (declared !== null && !c.req.raw.headers.has("transfer-encoding")) {
      if (Number(declared) > maxBytes) throw tooLarge();
      return next();
    }
    // No declared length: read up to the limit, and refuse as soon as it is passed.
    const reader = body.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await drain(reader, DRAIN_LIMIT_BYTES);
        throw tooLarge();
      }
      chunks.push(value);
    }
    const whole = new Uint8Array(size);
    let offset = 0;
    for (const chunk of chunks) {
      whole.set(chunk, offset);
      offset += chunk.byteLength;
    }
    c.req.raw = new Request(c.req.raw, { body: whole });
    return next();
  };
}

/** Reads and discards up to `limit` bytes; cancels the stream if there is more. */
async function drain(reader: ReadableStreamDefaultReader<Uint8Array>, limit: number): Promise<void> {
  let discarded = 0;
  while (discarded <= limit) {
    const { done, value } = await reader.read();
    if (done) return;
    discarded += value.byteLength;
  }
  await reader.cancel().catch(() => {});
}
