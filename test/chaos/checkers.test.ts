import { describe, expect, it } from "vitest";
import { checkBacking } from "../../tools/chaos/checkers/backing.js";
import { checkClaims } from "../../tools/chaos/checkers/claims.js";
import { checkCounters } from "../../tools/chaos/checkers/counter.js";
import { checkForeignTouches, EXPIRY_SLACK_MS } from "../../tools/chaos/checkers/foreign-touch.js";
import { anomalyCounts, checkHistory } from "../../tools/chaos/checkers/index.js";
import { checkLiveness, percentile } from "../../tools/chaos/checkers/liveness.js";
import { checkOverlaps } from "../../tools/chaos/checkers/overlap.js";
import type { CounterEvent, HistoryEvent } from "../../tools/chaos/history.js";
import { audit, grant, monitorStream } from "./support/history.js";

/** The handshake's measure of a client process's clock against the harness's (`clock-offset`). */
function clockOffset(client: string, offsetMs: number, uncertaintyMs: number): HistoryEvent {
  return { t: 0, process: "harness", type: "info", f: "clock-offset", data: { client, offsetMs, uncertaintyMs } };
}

describe("checker 1: overlapping grants", () => {
  it("reads each process's times corrected by its measured clock offset", () => {
    // c0's clock runs 85 ms ahead: its release at 1,085 on its clock is at 1,000 on the harness's,
    // before c1's grant at 1,010.
    const history = [
      clockOffset("c0", 85, 5),
      clockOffset("c1", 0, 0.5),
      ...grant("c0.1", "a", { acquiredAt: 85, claimedUntil: 2085, releaseAt: 1085 }),
      ...grant("c1", "b", { acquiredAt: 1010, claimedUntil: 3000, releaseAt: 1500 }),
    ];
    expect(checkOverlaps(history).anomalies).toEqual([]);
  });

  it("negative control: an overlap that remains after the correction is reported", () => {
    const history = [
      clockOffset("c0", 85, 5),
      clockOffset("c1", 0, 0.5),
      ...grant("c0", "a", { acquiredAt: 85, claimedUntil: 2085, releaseAt: 1105 }),
      ...grant("c1", "b", { acquiredAt: 1010, claimedUntil: 3000, releaseAt: 1500 }),
    ];
    // c0 released at 1,020 on the harness clock: 10 ms into c1's grant.
    expect(checkOverlaps(history).anomalies).toHaveLength(1);
    expect(checkOverlaps(history).anomalies[0]).toMatchObject({ start: 1010, end: 1020 });
  });

  it("reports no overlap shorter than the two processes' handshake bounds allow, and one of one process whatever its bound", () => {
    // c0's release lands 4 ms into c1's grant by the corrected clocks, but c0's offset is only
    // known to within 5 ms and c1's to 0.5: the overlap may not have been real.
    const across = (u0: number, u1: number) => [
      clockOffset("c0", 0, u0),
      clockOffset("c1", 0, u1),
      ...grant("c0.1", "a", { acquiredAt: 0, claimedUntil: 2000, releaseAt: 1014 }),
      ...grant("c1", "b", { acquiredAt: 1010, claimedUntil: 3000, releaseAt: 1500 }),
    ];
    expect(checkOverlaps(across(5, 0.5)).anomalies).toEqual([]);
    // Negative controls: tight bounds, and two workers of one process (one clock: no cross-process error).
    expect(checkOverlaps(across(0.05, 0.05)).anomalies).toHaveLength(1);
    const within = [
      clockOffset("c0", 0, 5),
      ...grant("c0.1", "a", { acquiredAt: 0, claimedUntil: 2000, releaseAt: 1014 }),
      ...grant("c0.2", "b", { acquiredAt: 1010, claimedUntil: 3000, releaseAt: 1500 }),
    ];
    expect(checkOverlaps(within).anomalies).toHaveLength(1);
  });

  it("passes grants that follow each other", () => {
    const history = [
      ...grant("c0", "a", { acquiredAt: 0, claimedUntil: 1000, releaseAt: 400 }),
      ...grant("c1", "b", { acquiredAt: 450, claimedUntil: 1450, releaseAt: 900 }),
      ...grant("c2", "c", { acquiredAt: 1460, claimedUntil: 2400 }),
    ];
    const result = checkOverlaps(history);
    expect(result.grants).toBe(3);
    expect(result.anomalies).toEqual([]);
  });

  it("reports two claims that overlap, with the overlap interval", () => {
    const history = [
      ...grant("c0", "a", { acquiredAt: 0, claimedUntil: 1000 }),
      ...grant("c1", "b", { acquiredAt: 700, claimedUntil: 1700, releaseAt: 900 }),
    ];
    const result = checkOverlaps(history);
    expect(result.anomalies).toHaveLength(1);
    expect(result.anomalies[0]).toMatchObject({
      resource: "r",
      first: { process: "c0", lock: "a" },
      second: { process: "c1", lock: "b" },
      start: 700,
      end: 900,
    });
    expect(result.maxOverlapMs).toBe(200);
  });

  it("ends a claim at the release invoke and at a lost signal", () => {
    const released = [
      ...grant("c0", "a", { acquiredAt: 0, claimedUntil: 1000, releaseAt: 300 }),
      ...grant("c1", "b", { acquiredAt: 310, claimedUntil: 1300 }),
    ];
    const lost = [
      ...grant("c0", "a", { acquiredAt: 0, claimedUntil: 1000, lostAt: 850 }),
      ...grant("c1", "b", { acquiredAt: 860, claimedUntil: 1800 }),
    ];
    expect(checkOverlaps(released).anomalies).toEqual([]);
    expect(checkOverlaps(lost).anomalies).toEqual([]);
  });

  it("counts an extension's claim", () => {
    const history = [
      ...grant("c0", "a", { acquiredAt: 0, claimedUntil: 1000, extensions: [{ at: 800, claimedUntil: 1800 }] }),
      ...grant("c1", "b", { acquiredAt: 1200, claimedUntil: 2200 }),
    ];
    const [overlap] = checkOverlaps(history).anomalies;
    expect(overlap).toMatchObject({ start: 1200, end: 1800 });
  });

  it("counts a lock of several resources as a claim on each, and keeps names apart that only a separator joins", () => {
    const history = [
      ...grant("c0", "a", { resources: ["x", "y"], acquiredAt: 0, claimedUntil: 1000, releaseAt: 600 }),
      ...grant("c1", "b", { resource: "y", acquiredAt: 500, claimedUntil: 1500 }),
      // "x\ny" is its own resource: the pair's claim does not cover it.
      ...grant("c2", "c", { resource: "x\ny", acquiredAt: 100, claimedUntil: 900 }),
    ];
    const result = checkOverlaps(history);
    expect(result.grants).toBe(4);
    expect(result.anomalies).toHaveLength(1);
    expect(result.anomalies[0]).toMatchObject({
      resource: "y",
      first: { lock: "a" },
      second: { lock: "b" },
      start: 500,
      end: 600,
    });
  });

  it("keeps a second holder of the same token apart from the first (a lock passed on with its token)", () => {
    const history = [
      ...grant("c0.0", "a", { acquiredAt: 0, claimedUntil: 1000, releaseAt: 300 }),
      ...grant("c0.1", "a", { acquiredAt: 310, claimedUntil: 1000 }),
      ...grant("c1.0", "b", { acquiredAt: 400, claimedUntil: 1400 }),
    ];
    const [overlap] = checkOverlaps(history).anomalies;
    expect(overlap).toMatchObject({ first: { process: "c0.1", lock: "a" }, second: { process: "c1.0" }, start: 400 });
  });

  it("ignores other resources and differences within the cross-process tolerance", () => {
    const history = [
      ...grant("c0", "a", { acquiredAt: 0, claimedUntil: 1000 }),
      ...grant("c1", "b", { resource: "other", acquiredAt: 10, claimedUntil: 1000 }),
      ...grant("c2", "c", { acquiredAt: 999.5, claimedUntil: 2000 }),
    ];
    expect(checkOverlaps(history).anomalies).toEqual([]);
    expect(checkOverlaps(history, 0).anomalies).toHaveLength(1);
  });
});

describe("checker 2: claimed deadline against the nodes' real expiry", () => {
  // Audit sent at 100, answered at 110 on every node; PTTL 880 means expiry in [980, 991).
  const holding: [number, number, number] = [100, 110, 880];

  it("passes a claim below the quorum's guaranteed expiry and reports the margin", () => {
    const result = checkClaims([audit(950, [holding, holding, holding, false, false])], 3);
    expect(result.anomalies).toEqual([]);
    expect(result.audits).toBe(1);
    expect(result.minMarginMs).toBe(30);
    expect(result.minUpperMarginMs).toBe(41);
  });

  it("never reports a claim within the audit's own round trip", () => {
    // 985 is above the lower bound (980) but below the upper bound (991): not certain.
    const result = checkClaims([audit(985, [holding, holding, holding])], 3);
    expect(result.anomalies).toEqual([]);
    expect(result.minMarginMs).toBe(-5);
  });

  it("reports a claim later than the quorum-th latest expiry", () => {
    const short: [number, number, number] = [100, 110, 300];
    // Two nodes hold it long, three short: the 3rd latest expiry is the short one (< 411).
    const result = checkClaims([audit(950, [holding, holding, short, short, short])], 3);
    expect(result.anomalies).toHaveLength(1);
    expect(result.anomalies[0]).toMatchObject({ claimedDeadline: 950, quorumExpiryUpperBound: 411, overClaimMs: 539 });
  });

  it("reports a claim when fewer than a quorum hold the token at all", () => {
    const result = checkClaims([audit(950, [holding, holding, false, false, false])], 3);
    expect(result.anomalies).toHaveLength(1);
    // The nodes without our key lost it by their answer (t + 1 = 1): the claim reaches 949 ms past.
    expect(result.anomalies[0]?.overClaimMs).toBe(949);
  });

  it("does not report a claim that had ended before the audit read the nodes (a paused client)", () => {
    // Claimed until 950; the audit ran at 2000, when no node held the key any more: consistent.
    const result = checkClaims([audit(950, [false, false, false, false, false], 2000)], 3);
    expect(result.anomalies).toEqual([]);
  });

  it("draws no conclusion when silent nodes could make up the quorum", () => {
    const result = checkClaims([audit(5000, [holding, holding, null, null, null])], 3);
    expect(result.anomalies).toEqual([]);
    expect(result.inconclusive).toBe(1);
  });

  it("counts silent nodes as holding forever, and still reports a claim no quorum can back", () => {
    // Two silent nodes and one holder until < 991 cannot keep a quorum of 3 until 5000.
    const result = checkClaims([audit(5000, [holding, holding, null, null, false])], 3);
    expect(result.anomalies).toHaveLength(1);
    expect(result.anomalies[0]?.quorumExpiryUpperBound).toBe(991);
  });
});

describe("checker 2, from the nodes' log: no other quorum can form until the claim ends", () => {
  // Client c0 holds "r" with token hash "a" from 0, claiming until 1000; each node set the key at 0 with PX 1000.
  const sets = (nodes: number[]) =>
    nodes.flatMap((n) => monitorStream(n, [{ t: 0, cmd: "SET", key: "r", value: "a", nx: true, ms: 1000 }]));
  const shorten = (nodes: number[], at: number, ms: number) =>
    nodes.flatMap((n) =>
      monitorStream(n, [
        { t: at, cmd: "EVALSHA", script: "extend", key: "r", value: "a" },
        { t: at, cmd: "PEXPIRE", key: "r", ms, source: "lua" },
      ]).map((e) => ({ ...e, seq: e.seq + 1 })),
    );
  const claim = grant("c0", "a", { acquiredAt: 5, claimedUntil: 980 });

  it("passes a claim the nodes back until its end", () => {
    const result = checkBacking([...claim, ...sets([0, 1, 2, 3, 4])], 5, 3, 1000);
    expect(result).toEqual({ checked: 1, anomalies: [] });
  });

  it("reports a claim outliving the keys: a shorter TTL landed on all but two nodes", () => {
    const history = [...claim, ...sets([0, 1, 2, 3, 4]), ...shorten([0, 1, 2], 100, 200)];
    const result = checkBacking(history, 5, 3, 1000);
    expect(result.anomalies).toEqual([{ process: "c0", resource: "r", lock: "a", t: 980, holders: [3, 4] }]);
  });

  it("needs N - q + 1 holders, so a quorum sized for one forgetful node tolerates one", () => {
    const history = [...claim, ...sets([0, 1, 2, 3]), ...shorten([0], 100, 200)];
    expect(checkBacking(history, 5, 4, 1000).anomalies).toEqual([]);
    expect(checkBacking([...history, ...shorten([1, 2], 100, 200)], 5, 4, 1000).anomalies).toHaveLength(1);
  });

  it("reads a release the nodes logged before the client invoked it as the holder's own release, not a lost key", () => {
    // The signature seen in delayed-restarts and client-pauses: the token on nodes 0-3 after the
    // grant, and at the release's invoke the log has it on node 3 only, while the release found
    // it on 4 nodes. With the client's clock 3 ms ahead of the nodes', the release the client
    // invoked at 200 reached nodes 0-2 at 197-199 on their clocks: the replay, cut at 200, has
    // already applied the holder's own compare-and-DEL there. Asked just before that release
    // arrived, those nodes held the token: the claim was backed, and the skew is reported.
    // A node's log lines are numbered: after the SET (0) and a shortened TTL (1-2) where there is one.
    const release = (node: number, at: number, after = 1) =>
      monitorStream(node, [
        { t: at, cmd: "EVALSHA", script: "release", key: "r", value: "a" },
        { t: at, cmd: "DEL", key: "r", source: "lua" },
      ]).map((e) => ({ ...e, seq: e.seq + after }));
    const held = grant("c2", "a", { acquiredAt: 5, claimedUntil: 980, releaseAt: 200 });
    const skewed = [...held, ...sets([0, 1, 2, 3]), ...release(0, 197), ...release(1, 198), ...release(2, 199)];
    const result = checkBacking([...skewed, ...release(3, 203)], 5, 3, 1000);
    expect(result.anomalies).toEqual([]);
    expect(result.clockSkewed).toEqual({ count: 1, maxEarlyMs: 3 });
    // Negative control: the same skew, but nodes 0-2 had lost the key before the release came
    // (a shorter TTL ran out at 30): the claim was not backed, whatever the clocks say.
    const lost = [...held, ...sets([0, 1, 2, 3]), ...shorten([0, 1, 2], 20, 10)];
    const skewedLost = [
      ...lost,
      ...release(0, 197, 3),
      ...release(1, 198, 3),
      ...release(2, 199, 3),
      ...release(3, 203),
    ];
    const reported = checkBacking(skewedLost, 5, 3, 1000);
    expect(reported.anomalies).toHaveLength(1);
    expect(reported.anomalies[0]).toMatchObject({ lock: "a", t: 200, holders: [3] });
    expect(reported.clockSkewed).toBeUndefined();
    // The same release logged after its invoke, as aligned clocks show it: nothing to report.
    const aligned = [...held, ...sets([0, 1, 2, 3]), ...[0, 1, 2, 3].flatMap((n) => release(n, 202 + n))];
    expect(checkBacking(aligned, 5, 3, 1000)).toEqual({ checked: 1, anomalies: [] });
  });

  it("reports no claim a clock offset within its handshake's bound would back, and still reports one none would", () => {
    // The CI failure on f158b62, rescaled: client c1's handshake measured its clock 7.7 ms ahead,
    // give or take 7.85 (a loaded machine: its best ping took 15.7 ms). Its grant returned at 103.6
    // and it released at 108.4 on its clock; the nodes logged the SETs at 93.3-104.4 and the
    // release from 111.8. Corrected by 7.7, the claim ends at 100.7, when only nodes 1 and 2 had
    // the key. But the grant cannot have returned before the third SET (101.3): the true offset was
    // at most 2.3, and at every end the bound allows from 100.7 + 2.3 on, all five held the key.
    const clock = (uncertaintyMs: number): HistoryEvent => ({
      t: 0,
      process: "harness",
      type: "info",
      f: "clock-offset",
      data: { client: "c1", offsetMs: 7.7, uncertaintyMs },
    });
    const setAt = [101.3, 93.3, 100.3, 102.8, 104.4];
    const releaseAt = [111.8, 113.9, 115.0, 115.3, 115.6];
    const node = (n: number) =>
      monitorStream(n, [
        { t: setAt[n] as number, cmd: "SET", key: "r", value: "b", nx: true, ms: 2000 },
        { t: releaseAt[n] as number, cmd: "EVALSHA", script: "release", key: "r", value: "b" },
        { t: releaseAt[n] as number, cmd: "DEL", key: "r", source: "lua" },
      ]);
    const held = grant("c1.3", "b", { acquiredAt: 103.6, claimedUntil: 2000, releaseAt: 108.4 });
    const nodes = [0, 1, 2, 3, 4].flatMap((n) => node(n));
    const result = checkBacking([clock(7.85), ...held, ...nodes], 5, 3, 2000);
    expect(result.anomalies).toEqual([]);
    expect(result.clockUncertain).toEqual({ count: 1, maxUncertaintyMs: 7.85 });
    // Negative controls: the same log with a tight handshake (the correction is then trusted), and
    // with the key gone from three nodes long before any end the bound allows.
    const tight = checkBacking([clock(0.05), ...held, ...nodes], 5, 3, 2000);
    expect(tight.anomalies).toHaveLength(1);
    expect(tight.anomalies[0]).toMatchObject({ lock: "b", t: expect.closeTo(100.7, 6), holders: [1, 2] });
    expect(tight.clockUncertain).toBeUndefined();
    // Nodes 0, 2 and 3 set another client's key, never ours: no end the bound allows is backed.
    const others = [0, 2, 3].flatMap((n) =>
      monitorStream(n, [{ t: setAt[n] as number, cmd: "SET", key: "r", value: "c", nx: true, ms: 2000 }]),
    );
    const gone = checkBacking([clock(7.85), ...held, ...node(1), ...node(4), ...others], 5, 3, 2000);
    expect(gone.anomalies).toHaveLength(1);
    expect(gone.clockUncertain).toBeUndefined();
  });

  it("counts a restarted node as possibly holding anything until its keys surely expired", () => {
    const reset = (node: number): HistoryEvent => ({
      t: 500,
      process: `node${node}`,
      type: "info",
      f: "monitor-reset",
      node,
      seq: 5,
      reason: "empty",
    });
    const history = [...claim, ...sets([0, 1, 2]), ...shorten([0, 1], 100, 200), reset(0), reset(1)];
    expect(checkBacking(history, 5, 3, 1000).anomalies).toEqual([]);
  });
});

describe("checker 3: releases and extensions that touch another client's key", () => {
  const set = (t: number, value: string, ms = 1000) => ({ t, cmd: "SET", key: "k", value, nx: true, ms });
  const script = (t: number, name: string, token: string) => ({
    t,
    cmd: "EVALSHA",
    script: name,
    key: "k",
    value: token,
  });
  const lua = (t: number, cmd: string, ms?: number) => ({
    t,
    cmd,
    key: "k",
    source: "lua" as const,
    ...(ms === undefined ? {} : { ms }),
  });

  it("passes a holder releasing and extending its own key", () => {
    const history = monitorStream(0, [
      set(0, "A"),
      script(100, "extend", "A"),
      lua(100, "PEXPIRE", 1000),
      script(200, "release", "A"),
      lua(200, "DEL"),
      set(300, "B"),
    ]);
    const result = checkForeignTouches(history, 1000);
    expect(result).toEqual({ touches: 2, anomalies: [] });
  });

  it("reports a release deleting the key another client acquired after an expiry", () => {
    const history = monitorStream(0, [
      set(0, "A", 500),
      set(300, "B"), // refused: A still holds it
      set(700, "B"), // A expired at 500: B holds it
      script(800, "release", "A"),
      lua(800, "DEL"),
    ]);
    const { anomalies } = checkForeignTouches(history, 1000);
    expect(anomalies).toHaveLength(1);
    expect(anomalies[0]).toMatchObject({
      node: 0,
      key: "k",
      script: "release",
      cmd: "DEL",
      token: "A",
      possible: ["B"],
    });
  });

  it("reports an extension re-arming a foreign key", () => {
    const history = monitorStream(2, [set(0, "B"), script(50, "extend", "A"), lua(50, "PEXPIRE", 1000)]);
    expect(checkForeignTouches(history, 1000).anomalies).toHaveLength(1);
  });

  it("keeps both states near an expiry instead of guessing", () => {
    const near = 500 + EXPIRY_SLACK_MS / 2;
    const history = (releaseAt: number) =>
      monitorStream(0, [
        set(0, "A", 500),
        set(near, "B"), // may or may not have found A expired
        script(releaseAt, "release", "A"),
        lua(releaseAt, "DEL"),
      ]);
    expect(checkForeignTouches(history(near + 1), 1000).anomalies).toEqual([]);
    // Well past A's expiry the key is B's or nobody's: a DEL for A is foreign either way.
    const late = checkForeignTouches(history(500 + EXPIRY_SLACK_MS + 1), 1000).anomalies;
    expect(late.map((a) => a.possible)).toEqual([[null, "B"]]);
  });

  it("assumes nothing about a node that restarted until its keys surely expired", () => {
    const reset: HistoryEvent = {
      t: 0,
      process: "node0",
      type: "info",
      f: "monitor-reset",
      node: 0,
      seq: 0,
      reason: "empty",
    };
    const lines = monitorStream(0, [
      script(100, "release", "A"),
      lua(100, "DEL"),
      script(5000, "release", "A"),
      lua(5000, "DEL"),
    ]);
    const history = [reset, ...lines.map((l) => ({ ...l, seq: l.seq + 1 }))];
    const result = checkForeignTouches(history, 1000);
    // At 100 the key may hold anything; at 5000 it surely expired and nobody set it since.
    expect(result.anomalies.map((a) => a.t)).toEqual([5000]);
  });

  it("does not count the harness's own scripts, but follows what they do", () => {
    const history = monitorStream(0, [
      set(0, "A"),
      script(10, "other", "x"),
      lua(10, "DEL"), // a clock jump deleted A's key
      set(20, "B"),
      script(30, "release", "A"),
      lua(30, "DEL"),
    ]);
    const result = checkForeignTouches(history, 1000);
    expect(result.touches).toBe(1);
    expect(result.anomalies).toHaveLength(1);
  });
});

describe("checker 4: lost updates on the protected counter", () => {
  const write = (process: string, read: number, prev: number, extra: Partial<CounterEvent> = {}): CounterEvent => ({
    t: 1,
    process,
    type: "ok",
    f: "write",
    resource: "r",
    lock: "a",
    variant: "unfenced",
    read,
    value: read + 1,
    prev,
    ...extra,
  });

  it("passes increments that each replaced what they read", () => {
    const result = checkCounters([write("c0", 0, 0), write("c1", 1, 1), write("c0", 2, 2)]);
    expect(result.unfenced).toEqual({ writes: 3, rejected: 0, anomalies: [] });
    expect(result.fenced).toBeUndefined();
    expect(result.fencingAvailable).toBe(false);
  });

  it("reports a write that replaced someone else's increment", () => {
    const result = checkCounters([write("c1", 0, 0), write("c0", 0, 1)]);
    expect(result.unfenced.anomalies).toEqual([
      { process: "c0", resource: "r", variant: "unfenced", t: 1, read: 0, prev: 1 },
    ]);
  });

  it("checks the fenced counter once fencing is available, counting rejected stale writes", () => {
    const fencing: HistoryEvent = { t: 0, process: "c0", type: "info", f: "fencing", data: { available: true } };
    const result = checkCounters([
      fencing,
      write("c0", 0, 0, { variant: "fenced", accepted: true }),
      write("c1", 0, 0, { variant: "fenced", accepted: false, prev: undefined }),
      write("c2", 1, 5, { variant: "fenced", accepted: true }),
    ]);
    expect(result.fencingAvailable).toBe(true);
    expect(result.fenced?.rejected).toBe(1);
    expect(result.fenced?.anomalies).toHaveLength(1);
  });
});

describe("checker 5: liveness figures", () => {
  it("computes success rates, latency percentiles, and re-acquire time after a holder died", () => {
    const history: HistoryEvent[] = [
      ...grant("c0", "a", { acquiredAt: 10, claimedUntil: 1000 }),
      { t: 100, process: "c1", type: "invoke", f: "acquire", resource: "r" },
      { t: 150, process: "nemesis", type: "info", f: "fault-start", fault: { id: 1, kind: "hang", nodes: [0] } },
      { t: 180, process: "c2", type: "invoke", f: "acquire", resource: "r" },
      { t: 300, process: "c1", type: "fail", f: "acquire", resource: "r", error: "LOCK_HELD" },
      { t: 300, process: "c2", type: "fail", f: "acquire", resource: "r", error: "LOCK_HELD" },
      { t: 400, process: "nemesis", type: "info", f: "fault-end", fault: { id: 1, kind: "hang", nodes: [0] } },
      {
        t: 500,
        process: "nemesis",
        type: "info",
        f: "fault-start",
        fault: { id: 2, kind: "kill-client", clients: ["c0"], params: { holding: "r" } },
      },
      { t: 501, process: "nemesis", type: "info", f: "fault-end", fault: { id: 2, kind: "kill-client" } },
      ...grant("c1", "b", { acquiredAt: 1100, claimedUntil: 2000 }),
      { t: 3000, process: "harness", type: "info", f: "leftover-keys", data: { keys: 2, maxPttlMs: 700 } },
    ];
    const result = checkLiveness(history);
    expect(result).toMatchObject({ acquires: 4, acquired: 2, leftoverKeys: 2, leftoverMaxPttlMs: 700 });
    expect(result.successRate).toBe(0.5);
    // c2's attempt started during the hang; of the healthy ones (c0, c1, c1 again) 2 of 3 succeeded.
    expect(result.healthySuccessRate).toBeCloseTo(2 / 3);
    expect(result.reacquireAfterDeathMs).toEqual([600]);
    expect(result.p50Ms).toBe(5);
  });

  it("takes nearest-rank percentiles", () => {
    expect(percentile([1, 2, 3, 4], 0.5)).toBe(2);
    expect(percentile([1, 2, 3, 4], 0.99)).toBe(4);
    expect(percentile([], 0.5)).toBeNaN();
  });
});

describe("all checkers together", () => {
  it("counts anomalies per checker on a clean and on a faulty history", () => {
    const clean = [
      ...grant("c0", "a", { acquiredAt: 0, claimedUntil: 900, releaseAt: 500 }),
      audit(900, [
        [0, 1, 990],
        [0, 1, 990],
        [0, 1, 990],
      ]),
    ];
    const faulty = [
      ...grant("c0", "a", { acquiredAt: 0, claimedUntil: 900 }),
      ...grant("c1", "b", { acquiredAt: 600, claimedUntil: 1500 }),
      audit(2000, [
        [0, 1, 990],
        [0, 1, 990],
        [0, 1, 990],
      ]),
    ];
    const options = { nodes: 5, quorum: 3, maxTtlMs: 1000 };
    expect(anomalyCounts(checkHistory(clean, options))).toEqual({
      overlap: 0,
      overClaim: 0,
      foreignTouch: 0,
      lostUnfenced: 0,
      lostFenced: null,
      overPermits: 0,
      readWrite: 0,
    });
    expect(anomalyCounts(checkHistory(faulty, options))).toMatchObject({ overlap: 1, overClaim: 1 });
  });
});

describe("checkers 6 and 7: semaphores and read-write locks", () => {
  /** A grant of a primitive: the `mode` (and `permits`) its acquisition recorded. */
  function primitive(
    process: string,
    lock: string,
    mode: "permit" | "read" | "write",
    o: Parameters<typeof grant>[2],
  ): HistoryEvent[] {
    return grant(process, lock, o).map((e) =>
      e.f === "acquire" ? { ...e, mode, ...(mode === "permit" ? { permits: 2 } : {}) } : e,
    );
  }

  it("passes two permits of two at once, and leaves them out of C1 and C2", () => {
    const history = [
      ...primitive("c0", "a", "permit", { acquiredAt: 0, claimedUntil: 1000, releaseAt: 800 }),
      ...primitive("c1", "b", "permit", { acquiredAt: 100, claimedUntil: 1100, releaseAt: 900 }),
      ...primitive("c2", "c", "permit", { acquiredAt: 850, claimedUntil: 1850, releaseAt: 1200 }),
    ];
    const checks = checkHistory(history, { nodes: 3, quorum: 2, maxTtlMs: 4000 });
    expect(checks.primitives.permits[0]).toMatchObject({ mostAtOnce: 2, anomaly: undefined });
    expect(checks.overlap.grants).toBe(0);
    expect(anomalyCounts(checks)).toMatchObject({ overlap: 0, overClaim: 0, overPermits: 0, readWrite: 0 });
  });

  it("negative control: a third permit of two at once is reported, an extension's window counting once", () => {
    const history = [
      ...primitive("c0", "a", "permit", {
        acquiredAt: 0,
        claimedUntil: 1000,
        extensions: [{ at: 500, claimedUntil: 1500 }],
        releaseAt: 1400,
      }),
      ...primitive("c1", "b", "permit", { acquiredAt: 100, claimedUntil: 1100, releaseAt: 900 }),
      ...primitive("c2", "c", "permit", { acquiredAt: 850, claimedUntil: 1850, releaseAt: 1200 }),
    ];
    const checks = checkHistory(history, { nodes: 3, quorum: 2, maxTtlMs: 4000 });
    expect(checks.primitives.permits[0]?.anomaly).toMatchObject({ at: 851 });
    expect(anomalyCounts(checks).overPermits).toBe(1);
  });

  it("reads each process's times corrected by its measured clock offset, as C1 does", () => {
    // c2's clock runs 85 ms ahead: its writer, at 635-735 on its clock, came at 550-650 on the
    // harness's, inside c1's read (100-600). Uncorrected, the writer looked as if it came after.
    const readers = [
      ...primitive("c0", "a", "read", { acquiredAt: 0, claimedUntil: 1000, releaseAt: 500 }),
      ...primitive("c1", "b", "read", { acquiredAt: 100, claimedUntil: 1100, releaseAt: 600 }),
    ];
    const writer = primitive("c2", "w", "write", { acquiredAt: 635, claimedUntil: 1635, releaseAt: 735 });
    const options = { nodes: 3, quorum: 2, maxTtlMs: 4000 };
    const skewed = checkHistory([clockOffset("c2", 85, 0.05), ...readers, ...writer], options);
    // (Its window cut by its 0.05 ms bound: certain from 550.05.)
    expect(skewed.primitives.readWrite).toEqual([
      expect.objectContaining({ writer: "c2/w", other: "c1/b", start: 550.05, end: 600 }),
    ]);
    // Control: the same clock known only to within 60 ms (the 50 ms overlap may not have been
    // real), and the same readings with the clocks aligned (the writer came after).
    const loose = checkHistory([clockOffset("c2", 85, 60), ...readers, ...writer], options);
    expect(loose.primitives.readWrite).toEqual([]);
    const aligned = checkHistory([clockOffset("c2", 0, 0.05), ...readers, ...writer], options);
    expect(aligned.primitives.readWrite).toEqual([]);
  });

  it("passes readers side by side and a writer after them; reports a writer beside a reader", () => {
    const readers = [
      ...primitive("c0", "a", "read", { acquiredAt: 0, claimedUntil: 1000, releaseAt: 500 }),
      ...primitive("c1", "b", "read", { acquiredAt: 100, claimedUntil: 1100, releaseAt: 600 }),
    ];
    const writer = (at: number) =>
      primitive("c2", "w", "write", { acquiredAt: at, claimedUntil: at + 1000, releaseAt: at + 100 });
    const clean = checkHistory([...readers, ...writer(610)], { nodes: 3, quorum: 2, maxTtlMs: 4000 });
    expect(anomalyCounts(clean)).toMatchObject({ overlap: 0, readWrite: 0 });
    const broken = checkHistory([...readers, ...writer(550)], { nodes: 3, quorum: 2, maxTtlMs: 4000 });
    expect(broken.primitives.readWrite).toEqual([
      expect.objectContaining({ writer: "c2/w", other: "c1/b", otherMode: "read", start: 550, end: 600 }),
    ]);
  });
});
