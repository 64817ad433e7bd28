/**
 * The name of a key set (the gate's keys, the isolate's hot resources) is its JSON: every client
 * must build the same name. A single key is named without the JSON serializer when it needs no
 * escape; the name must still be exactly `JSON.stringify([key])`.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { keysHash } from "../../../src/core/keys.js";
import { hotKeyOf, jsonOfOne } from "../../../src/waiting/gate.js";

/** Keys JSON escapes, one per kind of escape: a shortcut that skips the escape must fail on each. */
const escaped = [
  'say "hi"',
  "back\\slash",
  "tab\there",
  "nul\u0000",
  "\u001f",
  "lone \ud800",
  "lone \udfff",
  "x\ud83d",
];
const plain = ["cpu:1", "", "ünïcödé", "emoji 😀", "\u007f del", "\u2028\u2029", "a,b", '["a"]'];

describe("jsonOfOne", () => {
  it("names every key as JSON.stringify([key]) does, escapes and well-formed surrogate pairs included", () => {
    for (const key of [...escaped, ...plain]) expect(jsonOfOne(key)).toBe(JSON.stringify([key]));
  });

  it("takes the serializer for the keys that need an escape (a bare quoting would differ on each)", () => {
    for (const key of escaped) expect(`["${key}"]`).not.toBe(JSON.stringify([key]));
  });

  it("agrees with JSON.stringify on arbitrary strings, lone surrogates included", () => {
    let checked = 0;
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 40 }), (key) => {
        checked++;
        expect(jsonOfOne(key)).toBe(JSON.stringify([key]));
      }),
      { numRuns: 2000 },
    );
    expect(checked).toBeGreaterThanOrEqual(2000);
  });

  it("is what hotKeyOf names a single key by, and lists of several keys stay JSON", () => {
    for (const key of [...escaped, ...plain]) expect(hotKeyOf([key])).toBe(JSON.stringify([key]));
    const several = ["a", 'b"c'];
    expect(hotKeyOf(several)).toBe(JSON.stringify(several));
  });
});

describe("keysHash", () => {
  it("picks the same gate as every earlier version: the hashes are pinned (clients of two versions share the gates)", () => {
    expect(keysHash(["cpu:1"])).toBe(4038585219);
    expect(keysHash(["a", "b"])).toBe(3788507396);
    expect(keysHash(["a\nb"])).toBe(2458740893);
    expect(keysHash(["ünï😀", ""])).toBe(2449844110);
    // A key longer than 65,535 units mixes its length's upper half too.
    expect(keysHash(["x".repeat(70_000)])).toBe(1635014314);
  });
});
