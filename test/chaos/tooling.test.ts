import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { extendScript } from "../../src/core/scripts/extend.js";
import { releaseScript } from "../../src/core/scripts/release.js";
import { handOverScript } from "../../src/waiting/scripts/hand-over.js";
import { PATCHES, replaceOnce } from "../../tools/chaos/build.js";
import { forkClient } from "../../tools/chaos/clients.js";
import { verdictOf } from "../../tools/chaos/harness.js";
import { tokenId } from "../../tools/chaos/history.js";
import { classifyScript, monitorLineToEvent, parseMonitorLine } from "../../tools/chaos/monitor.js";
import { CLOCK_JUMP_SCRIPT, drawSchedule } from "../../tools/chaos/nemesis.js";
import { parseOptions } from "../../tools/chaos/options.js";
import type { ClientConfig } from "../../tools/chaos/protocol.js";
import { createRng } from "../../tools/chaos/rng.js";
import { SCENARIOS, scenarioByName } from "../../tools/chaos/scenarios.js";

describe("MONITOR lines", () => {
  it("parses Redis's quoting", () => {
    expect(parseMonitorLine('+1795332124.849890 [0 lua] "DEL" "k"')).toEqual({
      time: "1795332124.849890",
      args: ["DEL", "k"],
      source: "lua",
    });
    expect(parseMonitorLine('+1.5 [0 127.0.0.1:6000] "SET" "a\\"b\\\\c\\x01\\n" ""')?.args).toEqual([
      "SET",
      'a"b\\c\u0001\n',
      "",
    ]);
    expect(parseMonitorLine("+OK")).toBeUndefined();
  });

  it("turns lines into events with hashed tokens, and learns script names from EVAL", () => {
    const scripts = new Map<string, "extend" | "release" | "other">();
    const line = (args: string[], source = "127.0.0.1:5000") => ({ time: "1000.000500", args, source });
    const set = monitorLineToEvent(line(["set", "chaos:r", "tok", "NX", "PX", "1500"]), 2, 7, "chaos:", scripts);
    expect(set).toMatchObject({ t: 1_000_000.5, node: 2, seq: 7, cmd: "SET", key: "chaos:r", nx: true, ms: 1500 });
    expect(set?.value).toBe(tokenId("tok"));
    expect(JSON.stringify(set)).not.toContain('"tok"');

    const evalLine = line(["EVAL", releaseScript.source, "1", "chaos:r", "tok"]);
    expect(monitorLineToEvent(evalLine, 0, 0, "chaos:", scripts)).toMatchObject({ cmd: "EVAL", script: "release" });
    const evalsha = line(["EVALSHA", releaseScript.sha1, "1", "chaos:r", "tok"]);
    expect(monitorLineToEvent(evalsha, 0, 1, "chaos:", scripts)).toMatchObject({
      script: "release",
      key: "chaos:r",
      value: tokenId("tok"),
    });
    expect(monitorLineToEvent(line(["PEXPIRE", "chaos:r", "900"], "lua"), 0, 2, "chaos:", scripts)).toMatchObject({
      source: "lua",
      cmd: "PEXPIRE",
      ms: 900,
    });
    // Keys outside the lock prefix and reads are not needed by the replay.
    expect(monitorLineToEvent(line(["SET", "counter:x", "1"]), 0, 3, "chaos:", scripts)).toBeUndefined();
    expect(monitorLineToEvent(line(["GET", "chaos:r"]), 0, 4, "chaos:", scripts)).toBeUndefined();
  });

  it("keeps exact lock keys outside the prefix, and tags a second cluster's keys", () => {
    const scripts = new Map<string, "extend" | "release" | "other">();
    const line = (args: string[]) => ({ time: "1000.000500", args, source: "127.0.0.1:5000" });
    const json = '["chaos:a","chaos:b"]';
    const keys = { extra: new Set([json]), tag: "twin/" };
    expect(monitorLineToEvent(line(["DEL", json]), 0, 0, "chaos:", scripts, keys)).toMatchObject({
      key: `twin/${json}`,
    });
    expect(monitorLineToEvent(line(["DEL", '["x"]']), 0, 1, "chaos:", scripts, keys)).toBeUndefined();
    const evalsha = line(["EVALSHA", releaseScript.sha1, "1", "chaos:r", "tok"]);
    expect(monitorLineToEvent(evalsha, 0, 2, "chaos:", scripts, keys)).toMatchObject({ key: "twin/chaos:r" });
  });

  it("classifies the library's scripts and never the harness's own", () => {
    expect(classifyScript(extendScript.source)).toBe("extend");
    expect(classifyScript(releaseScript.source)).toBe("release");
    expect(classifyScript(handOverScript.source)).toBe("release");
    expect(classifyScript(CLOCK_JUMP_SCRIPT)).toBe("other");
  });
});

describe("patched builds", () => {
  const src = (file: string) => readFileSync(new URL(`../../src/${file}`, import.meta.url), "utf8");

  it("re-introduces the shortened-extension defect in extended()", () => {
    const [patch] = PATCHES["defect-extension"];
    const patched = patch?.apply(src(patch.file)) ?? "";
    const body = (name: string) =>
      patched.slice(patched.indexOf(`  ${name}(`), patched.indexOf("\n  }\n", patched.indexOf(`  ${name}(`)));
    expect(body("extended")).toMatch(/if \(deadline > this\.#deadline\) this\.#deadline = deadline;/);
    expect(body("extended")).not.toMatch(/\n\s*this\.#deadline = deadline;/);
    expect(body("extensionStarted")).not.toContain("capDeadline");
  });

  it("builds a release script without the token comparison, with a matching SHA-1", () => {
    const [patch] = PATCHES["broken-release"];
    const patched = patch?.apply(src(patch.file)) ?? "";
    expect(patched).toContain("if true then");
    expect(patched).not.toContain(releaseScript.sha1);
  });

  it("gives the next holder of a hand-over the releasing holder's token, on every node", () => {
    const [patch] = PATCHES["shared-token"];
    const patched = patch?.apply(src(patch.file)) ?? "";
    expect(patched).toContain("handOverOnNode(engine.node(i), keys, token, { ...handoff.offer, token }, context)");
    // The gate node: the waiter's token replaced by the releasing holder's in what the gate sets.
    expect(patched.includes("next && { ...next, token }") || patched.includes("token: token,")).toBe(true);
  });

  it("keys the isolate's state by the nodes' display ids", () => {
    const [patch] = PATCHES["display-id"];
    const patched = patch?.apply(src(patch.file)) ?? "";
    const body = /export function nodeIdentity\([^)]*\)[^{]*\{([\s\S]*?)\n\}/.exec(patched)?.[1];
    expect(body?.trim()).toBe(`return \`rest \${node.id}\`;`);
  });

  it('joins the keys of a resource set with "\\n" and takes up any offer filed under that name', () => {
    const [gate, hot] = PATCHES["newline-hot-key"];
    const patchedGate = gate?.apply(src(gate.file)) ?? "";
    const body = /export function hotKeyOf\([^)]*\)[^{]*\{([\s\S]*?)\n\}/.exec(patchedGate)?.[1];
    expect(body?.trim()).toBe('return keys.join("\\n");');
    expect(hot?.apply(src(hot.file))).not.toMatch(/sameKeys\(offer\.keys/);
  });

  it("fails loudly when a patch target is gone", () => {
    expect(() => PATCHES["defect-extension"][0]?.apply("class Lock {}")).toThrow(/patch target not found/);
    expect(() => replaceOnce("a a", /a/, "b", "twice")).toThrow(/found 2/);
    for (const variant of ["shared-token", "display-id", "newline-hot-key"] as const) {
      for (const patch of PATCHES[variant]) expect(() => patch.apply("class X {}")).toThrow(/patch target not found/);
    }
  });
});

describe("nemesis schedule", () => {
  const options = {
    kinds: ["hang", "restart-now", "clock-jump", "partition"] as const,
    durationMs: 20_000,
    nodes: 5,
    clients: ["c0", "c1", "c2"],
    quorum: 4,
    ttlMs: 1000,
  };

  it("is the same for the same seed and differs for another", () => {
    const a = drawSchedule(createRng(7), options);
    expect(drawSchedule(createRng(7), options)).toEqual(a);
    expect(drawSchedule(createRng(8), options)).not.toEqual(a);
    expect(a.length).toBeGreaterThan(5);
  });

  it("aims single-node faults at a target node (a hot key's gate) about half the time, and only then", () => {
    const kinds = ["hang", "drop", "pause-node"] as const;
    const hits = (targetNode?: number) => {
      const schedule = drawSchedule(createRng(5), {
        ...options,
        kinds,
        durationMs: 200_000,
        ...(targetNode === undefined ? {} : { targetNode }),
      });
      const onNode3 = schedule.filter((s) => s.fault.nodes?.length === 1 && s.fault.nodes[0] === 3).length;
      return onNode3 / schedule.length;
    };
    // Half aimed, plus a fifth of the other half drawn at random: 0.6; without a target, a fifth.
    expect(hits(3)).toBeGreaterThan(0.5);
    expect(hits(3)).toBeLessThan(0.7);
    expect(hits()).toBeLessThan(0.3);
  });

  it("never overlaps faults, spaces forgetful ones by a TTL, and never cuts a client from a quorum", () => {
    const schedule = drawSchedule(createRng(3), options);
    let lastEnd = 0;
    let lastAmnesia = Number.NEGATIVE_INFINITY;
    for (const s of schedule) {
      expect(s.atMs).toBeGreaterThanOrEqual(lastEnd);
      lastEnd = s.atMs + s.durationMs;
      if (s.fault.kind === "restart-now" || s.fault.kind === "clock-jump") {
        expect(s.atMs - lastAmnesia).toBeGreaterThanOrEqual(options.ttlMs);
        lastAmnesia = s.atMs;
      }
      if (s.fault.kind === "partition")
        expect(s.fault.nodes?.length).toBeLessThanOrEqual(options.nodes - options.quorum);
    }
  });
});

describe("command line and verdicts", () => {
  it("parses the documented options", () => {
    expect(parseOptions(["--seed", "42", "--duration", "600", "--scenario", "all", "--clients", "4"])).toEqual({
      seed: 42,
      durationS: 600,
      scenario: "all",
      processes: 3,
      clients: 4,
      out: undefined,
    });
    expect(parseOptions(["--processes=5"])).toMatchObject({ processes: 5, clients: 5 });
    expect(parseOptions(["--processes=2", "--clients=6"])).toMatchObject({ processes: 2, clients: 6 });
    expect(() => parseOptions(["--seed", "x"])).toThrow(/--seed/);
    expect(() => parseOptions(["--speed", "1"])).toThrow(/unknown option/);
  });

  it("judges safe scenarios by C1-C3 and the fenced C4, and controls by the checkers they must fire", () => {
    const clean = {
      overlap: 0,
      overClaim: 0,
      foreignTouch: 0,
      lostUnfenced: 3,
      lostFenced: null,
      overPermits: 0,
      readWrite: 0,
    };
    expect(verdictOf(scenarioByName("client-pauses"), clean).pass).toBe(true);
    expect(verdictOf(scenarioByName("healthy"), { ...clean, overClaim: 1 }).reasons).toEqual([
      "C2 found 1 over-claims",
    ]);
    expect(verdictOf(scenarioByName("healthy"), { ...clean, lostFenced: 1 }).pass).toBe(false);
    expect(verdictOf(scenarioByName("semaphore-faults"), { ...clean, overPermits: 1 }).reasons).toEqual([
      "C6 found 1 semaphores over their permits",
    ]);
    expect(verdictOf(scenarioByName("rw-faults"), { ...clean, readWrite: 2 }).pass).toBe(false);
    expect(verdictOf(scenarioByName("s8-q3"), clean).reasons).toEqual(["overlap did not fire"]);
    expect(verdictOf(scenarioByName("s8-q3"), { ...clean, overlap: 1 }).pass).toBe(true);
  });

  it("runs every patched build in a control", () => {
    const controlled = new Set(SCENARIOS.filter((s) => s.kind === "control").map((s) => s.build));
    for (const variant of Object.keys(PATCHES)) expect(controlled).toContain(variant);
  });

  it("has a negative control for every checker of safety", () => {
    const fired = new Set(SCENARIOS.filter((s) => s.kind === "control").flatMap((s) => s.mustFire ?? []));
    expect([...fired].sort()).toEqual([
      "foreignTouch",
      "lostUnfenced",
      "overClaim",
      "overPermits",
      "overlap",
      "readWrite",
    ]);
  });
});

describe("client processes", () => {
  // A client can die (SIGKILL, a crash) before the harness sees its exit; a message posted to it in
  // that window must be dropped, never thrown out of the harness as an unhandled EPIPE.
  it("drops a message to a client that died before its exit was seen", async () => {
    const dir = mkdtempSync(join(tmpdir(), "chaos-client-"));
    const bundle = join(dir, "client.cjs");
    writeFileSync(
      bundle,
      `process.on("message", (m) => {
        if (m.type === "init") process.send({ type: "ready" });
        if (m.type === "ping") process.send({ type: "pong", id: m.id, t: 0 });
      });`,
    );
    try {
      const client = await forkClient(bundle).init({ id: "c1" } as ClientConfig, () => {});
      const errors: unknown[] = [];
      const onError = (error: unknown) => errors.push(error);
      process.on("uncaughtException", onError);
      try {
        process.kill(client.pid, "SIGKILL");
        // Blocks this thread (no event loop turn, so no exit event) while the kernel closes the pipe.
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
        expect(client.alive()).toBe(true);
        for (let i = 0; i < 3; i++) client.stale({ resources: ["r"], token: "t", from: "c1.0", tag: "" });
        await client.kill();
        await new Promise((resolve) => setTimeout(resolve, 50));
      } finally {
        process.off("uncaughtException", onError);
      }
      expect(errors).toEqual([]);
      expect(client.alive()).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
