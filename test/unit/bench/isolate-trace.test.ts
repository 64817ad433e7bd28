/**
 * The isolates parts' trace analysis (tools/bench/isolate-trace.ts) on hand-made traces whose
 * figures are known: release → grant gaps, one take against several, when the take left, its
 * quorum-th answer, and the critical section. The trace never carries a request's arguments.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { releaseScript } from "../../../src/core/scripts/release.js";
import { gateScript } from "../../../src/waiting/scripts/gate.js";
import {
  analysePredictions,
  analyseTrace,
  describeReply,
  describeRequest,
  parseTrace,
  traceRecorder,
} from "../../../tools/bench/isolate-trace.js";

/** A take by `pid` at `at`: SETs to 4 nodes and the gate's script, answered `answers` ms later each. */
function take(pid: string, at: number, answers: readonly number[]): string[] {
  const nodes = ["1", "2", "3", "4", "5"];
  const sends = nodes.map((node, i) => `${at} ${pid} send ${node} ${i === 4 ? "EVALSHA" : "SET"}`);
  const recvs = nodes.map((node, i) => `${at + (answers[i] ?? 0)} ${pid} recv ${node} ${i === 4 ? "EVALSHA" : "SET"}`);
  return [...sends, ...recvs];
}

/** A request to the gate node (port 5) sent at `sent` and answered at `answered`: it lands halfway. */
function gate(pid: string, sent: number, answered: number, script: string, reply = ""): string[] {
  return [`${sent} ${pid} send 5 EVALSHA ${script}`, `${answered} ${pid} recv 5 EVALSHA ${script} ${reply}`.trimEnd()];
}

describe("the isolates trace analysis", () => {
  it("measures each handoff from the release to the next grant, and the take that won it", () => {
    const text = [
      "1000 a granted",
      "1050 a release",
      ...take("b", 1055, [20, 22, 25, 30, 40]),
      "1081 b granted", // after the quorum-th (3rd) answer at 1080
      "1131 b release",
      ...take("a", 1125, [20, 20, 20, 20, 20]), // early: refused
      ...take("a", 1160, [20, 21, 22, 23, 24]),
      "1183 a granted",
      "1233 a release",
      // A poll takes the gate, then the SETs go to the other four: one answer fewer makes the quorum.
      "1240 c send 5 EVALSHA",
      "1260 c recv 5 EVALSHA",
      ...["1", "2", "3", "4"].flatMap((node, i) => [
        `1261 c send ${node} SET`,
        `${1261 + [20, 21, 25, 30][i]!} c recv ${node} SET`,
      ]),
      "1283 c granted",
    ].join("\n");
    const f = analyseTrace(parseTrace(text), 3);
    expect(f.handoffs).toBe(3);
    expect(f.gap.p10).toBe(31);
    expect(f.gap.mean).toBe((31 + 52 + 50) / 3);
    expect(f.oneTake).toBe(2);
    expect(f.moreTakes).toBe(1);
    expect(f.aimed).toEqual({ count: 2, gap: expect.objectContaining({ mean: (31 + 52) / 2 }) });
    expect(f.afterPoll).toEqual({ count: 1, gap: expect.objectContaining({ mean: 50 }) });
    expect(f.takeOffset.mean).toBe((5 + 28) / 2);
    // b's aimed take: its 3rd answer, 25 ms; c's take after the poll: its 2nd, 21 ms.
    expect(f.takeToQuorum.mean).toBe((25 + 21) / 2);
    expect(f.section.mean).toBeCloseTo((50 + 50 + 50) / 3, 6);
    expect(f.section.sd).toBe(0);
  });

  it("counts a take whose requests left spread out (to land together) as one aimed take", () => {
    const text = [
      "1000 a granted",
      "1050 a release",
      // The farthest node first, the gate's script among them, the nearest last.
      "1040 b send 3 SET",
      "1052 b send 5 EVALSHA",
      "1060 b send 1 SET",
      "1075 b send 4 SET",
      "1090 b send 2 SET",
      ...["3", "5", "1", "4", "2"].map((node) => `1100 b recv ${node} ${node === "5" ? "EVALSHA" : "SET"}`),
      "1101 b granted",
    ].join("\n");
    const f = analyseTrace(parseTrace(text), 3);
    expect(f.oneTake).toBe(1);
    expect(f.moreTakes).toBe(0);
    expect(f.aimed.count).toBe(1);
    expect(f.takeOffset.mean).toBe(-10);
  });

  it("tells a handoff won by nodes asked again after an aimed take from one won after a poll", () => {
    const text = [
      "1000 a granted",
      "1050 a release",
      ...take("b", 1055, [20, 20, 20, 20, 20]), // aimed: the gate takes, two far nodes say "held"
      // Those two asked again: SETs alone, the gate already b's.
      ...["3", "4"].flatMap((node) => [`1085 b send ${node} SET`, `1105 b recv ${node} SET`]),
      "1106 b granted",
    ].join("\n");
    const f = analyseTrace(parseTrace(text), 3);
    expect(f.askedAgain).toEqual({ count: 1, gap: expect.objectContaining({ mean: 56 }) });
    expect(f.aimed.count).toBe(0);
    expect(f.afterPoll.count).toBe(0);
    expect(f.moreTakes).toBe(1);
    // Negative control: without the gate's script beside the first SETs, that take followed a poll.
    const polled = analyseTrace(parseTrace(text.replace(/ 5 EVALSHA/g, " 5 GET")), 3);
    expect(polled.afterPoll.count).toBe(1);
    expect(polled.askedAgain.count).toBe(0);
  });

  it("negative control: grants far from any release are not handoffs", () => {
    const text = ["1000 a granted", "1050 a release", "5000 b granted", "5050 b release"].join("\n");
    const f = analyseTrace(parseTrace(text), 3);
    expect(f.handoffs).toBe(0);
    expect(f.section.mean).toBe(50);
  });

  it("describes a request by its node's port, command name and library script only", () => {
    const body = JSON.stringify(["SET", "secret-key", "secret-token", "NX", "PX", 10000]);
    const described = describeRequest("http://127.0.0.1:40001/", body);
    expect(described).toBe("40001 SET");
    expect(describeRequest("http://127.0.0.1:40001/pipeline", JSON.stringify([["GET", "k"]]))).toBe("40001 PIPELINE");
    expect(describeRequest("http://127.0.0.1:40001/", "not json")).toBe("40001 ?");
    // The gate's script with its mode, another library script by name: never a key or a token.
    const poll = ["EVALSHA", gateScript.sha1, 4, "secret-key", "q", "l", "s", "waiter-id", "aim", "secret-token", 5000];
    expect(describeRequest("http://127.0.0.1:40001/", JSON.stringify(poll))).toBe("40001 EVALSHA gate:aim");
    const release = ["EVALSHA", releaseScript.sha1, 1, "secret-key", "secret-token"];
    expect(describeRequest("http://127.0.0.1:40001/", JSON.stringify(release))).toBe("40001 EVALSHA release");
    expect(describeRequest("http://127.0.0.1:40001/", JSON.stringify(["EVALSHA", "f".repeat(40), 0]))).toBe(
      "40001 EVALSHA",
    );
  });

  it("keeps the gate's answer, its first four figures, and no other", () => {
    const gate = "40001 EVALSHA gate:take";
    expect(describeReply(gate, JSON.stringify({ result: [1, 0, -2, -1, 120, 7, 3, 200, 9, 0, 2] }))).toBe("1,0,-2,-1");
    expect(describeReply(gate, JSON.stringify({ error: "ERR" }))).toBeUndefined();
    expect(describeReply("40001 SET", JSON.stringify({ result: "OK" }))).toBeUndefined();
    expect(describeReply("40001 EVALSHA release", JSON.stringify({ result: 1 }))).toBeUndefined();
  });

  it("counts the handoffs whose taker found the gate free with no release since the take before", () => {
    const text = [
      "1000 a granted",
      "1050 a release",
      // b's poll takes a gate that a release freed 10 ms ago: a handoff like any other.
      "1060 b send 5 EVALSHA gate:take",
      "1070 b recv 5 EVALSHA gate:take 1,0,-2,10",
      ...["1", "2", "3", "4"].flatMap((node) => [`1071 b send ${node} SET`, `1091 b recv ${node} SET`]),
      "1092 b granted",
      "1142 b release",
      // c's take found the gate free with no release since the take before: a placeholder ran out.
      "1150 c send 5 EVALSHA gate:take",
      "1160 c recv 5 EVALSHA gate:take 0,0,300,0",
      "1600 c send 5 EVALSHA gate:take",
      "1610 c recv 5 EVALSHA gate:take 1,0,-2,-1",
      ...["1", "2", "3", "4"].flatMap((node) => [`1611 c send ${node} SET`, `1631 c recv ${node} SET`]),
      "1632 c granted",
    ].join("\n");
    const f = analyseTrace(parseTrace(text), 3);
    expect(f.handoffs).toBe(2);
    expect(f.unreleased).toEqual({ count: 1, gap: expect.objectContaining({ mean: 1632 - 1142 }) });
    // Negative control: the same trace without the gate's answers counts none.
    const bare = text.replace(/ gate:take( \S+)?/g, "");
    expect(analyseTrace(parseTrace(bare), 3).unreleased.count).toBe(0);
  });

  it("measures the gate's predictions against the releases, and sorts the aimed takes that missed", () => {
    const lastHold = [
      ...gate("a", 1000, 1020, "gate:take", "1,0,-2,-1"), // a takes, landing at 1010
      ...gate("b", 1030, 1050, "gate:take", "0,0,9960,100"), // b first in line: free at 1040 + 100
      ...gate("b", 1100, 1120, "gate:aim", "0,0,9930,0"), // lands at 1110, before a's release
      ...gate("c", 1140, 1160, "gate:take", "0,0,9850,20"), // lands at 1150: free at 1170
      ...gate("a", 1160, 1180, "gate-release"), // lands at 1170: 30 ms after b's prediction, on c's
      ...gate("b", 1170, 1190, "gate:aim", "1,0,-2,0"), // lands at 1180 and takes
      ...gate("c", 1190, 1210, "gate:aim", "0,0,9980,0"), // lands at 1200: b's fresh key
    ];
    const earlierHolds = [
      ...gate("a", 400, 420, "gate:take", "1,0,-2,-1"),
      ...gate("a", 450, 470, "gate-release"),
      ...gate("a", 600, 620, "gate:take", "1,0,-2,-1"),
      ...gate("a", 650, 670, "gate-release"),
    ];
    const established = analysePredictions(parseTrace([...earlierHolds, ...lastHold].join("\n")));
    expect(established.aims).toEqual({ answered: 3, taken: 1, early: 1, afterAnotherTake: 1 });
    expect(established.established).toEqual(expect.objectContaining({ count: 2, mean: 15, p10: 0 }));
    expect(established.firstHolds.count).toBe(0);
    // Negative control: the same hold with none before it is an isolate's first, predicted apart.
    const first = analysePredictions(parseTrace(lastHold.join("\n")));
    expect(first.firstHolds).toEqual(expect.objectContaining({ count: 2, mean: 15 }));
    expect(first.established.count).toBe(0);
  });

  it("prices the aimed takes by how long after the release they landed, and finds the margin that costs least", () => {
    const text = [
      ...gate("a", 1000, 1020, "gate:take", "1,0,-2,-1"), // a takes, landing at 1010
      ...gate("b", 1030, 1050, "gate:take", "0,0,9960,70"), // every aim follows a poll
      ...gate("b", 1085, 1125, "gate:aim", "0,0,30,0"), // lands at 1105: 5 ms before a's release
      ...gate("a", 1100, 1120, "gate-release"), // lands at 1110
      ...gate("b", 1130, 1170, "gate:aim", "1,0,-2,0"), // sent again: lands at 1150 and takes
      ...gate("c", 1160, 1180, "gate:take", "0,0,9980,40"),
      ...gate("c", 1190, 1230, "gate:aim", "1,0,-2,0"), // lands at 1210, 3 ms after b's release
      ...gate("b", 1195, 1219, "gate-release"), // lands at 1207
      ...gate("d", 1250, 1270, "gate:take", "0,0,9950,50"),
      ...gate("d", 1300, 1340, "gate:aim", "1,0,-2,0"), // lands at 1320, 7 ms after c's release
      ...gate("c", 1303, 1323, "gate-release"), // lands at 1313
    ].join("\n");
    const { aimCost } = analysePredictions(parseTrace(text));
    // b's second aim went for the release its first came early for: it is not counted again.
    expect(aimCost.count).toBe(3);
    expect(aimCost.offset.mean).toBeCloseTo((5 - 3 - 7) / 3, 6);
    // b's first aim lands again 40 ms later, 35 ms after the release; c's and d's, 3 and 7 ms after.
    expect(aimCost.asAimed).toEqual({ meanMs: (35 + 3 + 7) / 3, early: 1 });
    // Every aim 5 ms later: b's lands with the release, c's and d's 8 and 12 ms after it.
    expect(aimCost.bestShift).toEqual({ shiftMs: 5, meanMs: (0 + 8 + 12) / 3, early: 0 });
    // Aims late by more than half their round trip: the best shift is the whole lateness, sooner.
    const late = [
      ...gate("a", 1000, 1020, "gate:take", "1,0,-2,-1"),
      ...gate("b", 1030, 1040, "gate:take", "0,0,9970,40"),
      ...gate("a", 1070, 1080, "gate-release"), // lands at 1075
      ...gate("b", 1100, 1110, "gate:aim", "1,0,-2,0"), // lands at 1105: 30 ms late
      ...gate("c", 1120, 1130, "gate:take", "0,0,9980,40"),
      ...gate("b", 1150, 1160, "gate-release"), // lands at 1155
      ...gate("c", 1180, 1190, "gate:aim", "1,0,-2,0"), // lands at 1185: 30 ms late
    ].join("\n");
    const lateCost = analysePredictions(parseTrace(late)).aimCost;
    expect(lateCost.asAimed).toEqual({ meanMs: 30, early: 0 });
    expect(lateCost.bestShift).toEqual({ shiftMs: -30, meanMs: 0, early: 0 });
    // Negative control: with no release through the gate, no aim is priced.
    const none = analysePredictions(parseTrace(text.replace(/ gate-release/g, " release")));
    expect(none.aimCost.count).toBe(0);
  });
});

describe("the trace recorder", () => {
  it("makes its folder when it starts: the trace is written at exit, too late to make it", () => {
    const root = mkdtempSync(join(tmpdir(), "isolate-trace-"));
    try {
      const dir = join(root, "not", "there");
      expect(traceRecorder(dir, "edge-redlock-defaults")).toBeDefined();
      expect(existsSync(dir)).toBe(true);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
