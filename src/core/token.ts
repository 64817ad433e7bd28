/**
 * Lock tokens: 160 random bits from the Web Crypto API, hex-encoded.
 * @module
 */

const TOKEN_BYTES = 20;
/** Random bytes are drawn in batches: one `getRandomValues` call per 128 tokens, not per token. */
const POOL_TOKENS = 128;
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

let pool = new Uint8Array(0);
let offset = 0;

/** A fresh random token (40 hex characters, 160 bits). Every byte is used once. */
export function randomToken(): string {
  if (offset + TOKEN_BYTES > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(TOKEN_BYTES * POOL_TOKENS));
    offset = 0;
  }
  let hex = "";
  for (let i = offset; i < offset + TOKEN_BYTES; i++) hex += HEX[pool[i] as number];
  offset += TOKEN_BYTES;
  return hex;
}
