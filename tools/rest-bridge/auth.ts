import { createHash, timingSafeEqual } from "node:crypto";

/** The body Upstash sends today for a missing or wrong token (see reference §2.3). */
export const UNAUTHORIZED_MESSAGE = "WRONGPASS invalid or missing auth token";

function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}

/**
 * Builds a checker for `Authorization: Bearer <token>` headers.
 *
 * Both sides are hashed with SHA-256 before `timingSafeEqual`, so the comparison takes the same
 * time whatever the length or content of the presented token (timingSafeEqual alone requires equal
 * lengths and would leak the length).
 */
export function createTokenCheck(token: string): (authorization: string | undefined) => boolean {
  if (token.length === 0) throw new Error("the bridge token must not be empty");
  const expected = digest(token);
  return (authorization) => {
    const match = /^Bearer +(.+)$/i.exec(authorization ?? "");
    // Hash something even when the header is malformed: the work done does not depend on it.
    const presented = digest(match?.[1] ?? "");
    return timingSafeEqual(presented, expected) && match !== null;
  };
}
