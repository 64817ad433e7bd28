/**
 * Lock tokens: 160 random bits from the Web Crypto API, hex-encoded.
 * @module
 */

const TOKEN_BYTES = 20;

/** A fresh random token (40 hex characters, 160 bits). */
export function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(TOKEN_BYTES));
  let hex = "";
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0");
  return hex;
}
