import { describe, expect, it } from "vitest";
import {
  byTime,
  type HistoryEvent,
  parseJsonLines,
  toJsonLines,
  tokenId,
  validateEvent,
} from "../../tools/chaos/history.js";
import { audit, grant } from "./support/history.js";

describe("history format", () => {
  it("round-trips through JSON lines", () => {
    const events: HistoryEvent[] = [
      ...grant("c0", "aaaa", { acquiredAt: 100, claimedUntil: 1000, releaseAt: 500 }),
      audit(1000, [[101, 102, 990], false, null]),
      { t: 50, process: "nemesis", type: "info", f: "fault-start", fault: { id: 1, kind: "hang", nodes: [2] } },
      {
        t: 60,
        process: "node1",
        type: "info",
        f: "monitor",
        node: 1,
        seq: 0,
        source: "lua",
        cmd: "DEL",
        key: "k",
      },
    ];
    const text = toJsonLines(events);
    expect(text.split("\n").filter(Boolean)).toHaveLength(events.length);
    expect(parseJsonLines(text)).toEqual(events);
  });

  it("rejects malformed events with the line number", () => {
    const good = JSON.stringify({ t: 1, process: "c0", type: "invoke", f: "acquire", resource: "r" });
    expect(() => parseJsonLines(`${good}\n{"t":"soon","process":"c0","type":"ok","f":"acquire"}`)).toThrow(
      /line 2: event.t/,
    );
    expect(() => parseJsonLines("not json")).toThrow(/line 1/);
  });

  it.each([
    [{ t: 1, process: "c0", type: "done", f: "acquire", resource: "r" }, /event.type/],
    [{ t: 1, process: "c0", type: "ok", f: "teleport" }, /unknown event.f/],
    [{ t: 1, process: "", type: "ok", f: "note" }, /process/],
    [{ t: 1, process: "c0", type: "ok", f: "acquire", resource: "r", lock: "a" }, /claimedDeadline/],
    [{ t: 1, process: "c0", type: "ok", f: "release", resource: "r" }, /lock id/],
    [{ t: 1, process: "c0", type: "invoke", f: "acquire" }, /resource/],
    [{ t: 1, process: "c0", type: "ok", f: "audit", resource: "r", lock: "a", claimedDeadline: 2 }, /nodes/],
    [{ t: 1, process: "nemesis", type: "info", f: "fault-start" }, /fault/],
    [{ t: 1, process: "node0", type: "info", f: "monitor", node: 0 }, /monitor event/],
  ])("rejects %j", (event, message) => {
    expect(() => validateEvent(event)).toThrow(message);
  });

  it("accepts a failed acquire without a lock id", () => {
    expect(() =>
      validateEvent({ t: 1, process: "c0", type: "fail", f: "acquire", resource: "r", error: "LOCK_HELD" }),
    ).not.toThrow();
  });

  it("sorts by time, keeping the order of simultaneous events", () => {
    const a: HistoryEvent = { t: 5, process: "a", type: "info", f: "note" };
    const b: HistoryEvent = { t: 1, process: "b", type: "info", f: "note" };
    const c: HistoryEvent = { t: 5, process: "c", type: "info", f: "note" };
    expect(byTime([a, b, c]).map((e) => e.process)).toEqual(["b", "a", "c"]);
  });

  it("identifies a token by a short hash that does not reveal it", () => {
    const token = "0123456789abcdef0123456789abcdef01234567";
    const id = tokenId(token);
    expect(id).toMatch(/^[0-9a-f]{12}$/);
    expect(token).not.toContain(id);
    expect(tokenId(token)).toBe(id);
    expect(tokenId(`${token}x`)).not.toBe(id);
  });
});
