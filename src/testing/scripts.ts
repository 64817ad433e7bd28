/**
 * Every Lua script edge-redlock sends (and the fenced-write guard users run on their own store):
 * the scripts a memory node runs, recognised by SHA-1 (`EVALSHA`) or by exact source (`EVAL`).
 * @module
 */
import { acquireAllScript } from "../core/scripts/acquire-all.js";
import { clusterScript } from "../core/scripts/cluster.js";
import { extendScript } from "../core/scripts/extend.js";
import { inspectScript } from "../core/scripts/inspect.js";
import { releaseScript } from "../core/scripts/release.js";
import type { Script } from "../core/scripts/script.js";
import { verifyScript } from "../core/scripts/verify.js";
import { fencedWriteScript } from "../fencing/guard.js";
import { fenceAcquireScript } from "../fencing/scripts/fence-acquire.js";
import { fenceInitScript } from "../fencing/scripts/fence-init.js";
import { fenceQuarantineScript } from "../fencing/scripts/fence-quarantine.js";
import { fenceRatchetScript } from "../fencing/scripts/fence-ratchet.js";
import { fenceReadScript } from "../fencing/scripts/fence-read.js";
import { fenceRepairScript } from "../fencing/scripts/fence-repair.js";
import { fenceRwWriteScript } from "../fencing/scripts/fence-rw-write.js";
import { rwExtendScript } from "../primitives/scripts/rw-extend.js";
import { rwReadScript } from "../primitives/scripts/rw-read.js";
import { rwReleaseScript } from "../primitives/scripts/rw-release.js";
import { rwVerifyScript } from "../primitives/scripts/rw-verify.js";
import { rwWriteScript } from "../primitives/scripts/rw-write.js";
import { semaphoreLineScript } from "../primitives/scripts/semaphore-line.js";
import { semaphoreProbeScript } from "../primitives/scripts/semaphore-probe.js";
import { gateScript } from "../waiting/scripts/gate.js";
import { gateReleaseScript } from "../waiting/scripts/gate-release.js";
import { handOverScript } from "../waiting/scripts/hand-over.js";

/** Every script a memory node runs. */
export const libraryScripts: readonly Script[] = Object.freeze([
  acquireAllScript,
  extendScript,
  releaseScript,
  inspectScript,
  verifyScript,
  clusterScript,
  gateScript,
  gateReleaseScript,
  handOverScript,
  fenceAcquireScript,
  fenceRatchetScript,
  fenceReadScript,
  fenceRepairScript,
  fenceQuarantineScript,
  fenceInitScript,
  fenceRwWriteScript,
  fencedWriteScript,
  semaphoreProbeScript,
  semaphoreLineScript,
  rwReadScript,
  rwWriteScript,
  rwReleaseScript,
  rwExtendScript,
  rwVerifyScript,
]);

const bySha = new Map(libraryScripts.map((script) => [script.sha1, script]));
const bySource = new Map(libraryScripts.map((script) => [script.source, script]));

/** The library script with this SHA-1, if any. */
export function scriptBySha(sha1: string): Script | undefined {
  return bySha.get(sha1.toLowerCase());
}

/** The library script with exactly this source, if any. */
export function scriptBySource(source: string): Script | undefined {
  return bySource.get(source);
}
