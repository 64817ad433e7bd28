/**
 * Lock tokens: 160 random bits from the Web Crypto API, hex-encoded.
 * @module
 */

const TOKEN_BYTES = 20;
/**
 * Random bytes are drawn in batches: one `getRandomValues` call per 1024 tokens (20 KiB, within
 * the 64 KiB a call may ask for), not per token; a call has a cost of its own besides its bytes.
 */
const POOL_TOKENS = 1024;
/** The character codes of the hex digits. */
const DIGITS = Array.from({ length: 16 }, (_, digit) => digit.toString(16).charCodeAt(0));
/**
 * A token's characters are written into one buffer and decoded at once: concatenating 20 pairs of
 * digits built a chain of intermediate strings per token (measured: 3× the bytes and more CPU).
 */
const characters = new Uint8Array(2 * TOKEN_BYTES);
const decoder = new TextDecoder();

let pool = new Uint8Array(0);
let offset = 0;

/** A fresh random token (40 hex characters, 160 bits). Every byte is used once. */
export function randomToken(): string {
  if (offset + TOKEN_BYTES > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(TOKEN_BYTES * POOL_TOKENS));
    offset = 0;
  }
  for (let i = 0; i < TOKEN_BYTES; i++) {
    const byte = pool[offset + i] as number;
    characters[2 * i] = DIGITS[byte >> 4] as number;
    characters[2 * i + 1] = DIGITS[byte & 15] as number;
  }
  offset += TOKEN_BYTES;
  return decoder.decode(characters);
}
