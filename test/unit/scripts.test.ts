import { describe, expect, it } from "vitest";
import { libraryScripts } from "./support/fake-node.js";

async function sha1(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

describe("Lua scripts", () => {
  for (const script of libraryScripts) {
    it(`${script.name}: the committed SHA-1 matches the source`, async () => {
      expect(script.sha1).toMatch(/^[0-9a-f]{40}$/);
      expect(await sha1(script.source)).toBe(script.sha1);
    });
  }
});
