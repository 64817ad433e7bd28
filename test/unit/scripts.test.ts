import { describe, expect, it } from "vitest";
import { fencedWriteScript } from "../../src/fencing/guard.js";
import { acquireAllScript } from "../../src/scripts/acquire-all.js";
import { extendScript } from "../../src/scripts/extend.js";
import { fenceAcquireScript } from "../../src/scripts/fence-acquire.js";
import { fenceInitScript } from "../../src/scripts/fence-init.js";
import { fenceQuarantineScript } from "../../src/scripts/fence-quarantine.js";
import { fenceRatchetScript } from "../../src/scripts/fence-ratchet.js";
import { fenceReadScript } from "../../src/scripts/fence-read.js";
import { fenceRepairScript } from "../../src/scripts/fence-repair.js";
import { gateScript } from "../../src/scripts/gate.js";
import { gateReleaseScript } from "../../src/scripts/gate-release.js";
import { inspectScript } from "../../src/scripts/inspect.js";
import { releaseScript } from "../../src/scripts/release.js";
import { verifyScript } from "../../src/scripts/verify.js";

async function sha1(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

describe("Lua scripts", () => {
  for (const script of [
    acquireAllScript,
    extendScript,
    releaseScript,
    inspectScript,
    verifyScript,
    gateScript,
    gateReleaseScript,
    fenceAcquireScript,
    fenceRatchetScript,
    fenceReadScript,
    fenceRepairScript,
    fenceQuarantineScript,
    fenceInitScript,
    fencedWriteScript,
  ]) {
    it(`${script.name}: the committed SHA-1 matches the source`, async () => {
      expect(script.sha1).toMatch(/^[0-9a-f]{40}$/);
      expect(await sha1(script.source)).toBe(script.sha1);
    });
  }
});
