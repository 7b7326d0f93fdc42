import { describe, expect, test } from "bun:test";
import { CASES, CLASSES } from "./cases.ts";
import { lenientForm } from "./lenient.ts";
import { readAloud } from "./read-aloud.ts";

describe("normalization table", () => {
  test("has at least 300 cases covering every class", () => {
    expect(CASES.length).toBeGreaterThanOrEqual(300);
    for (const caseClass of CLASSES) expect(CASES.filter((row) => row.class === caseClass).length).toBeGreaterThanOrEqual(10);
  });

  for (const row of CASES) {
    test(`${row.class}: ${row.written}`, () => {
      expect(lenientForm(readAloud(row.written))).toBe(lenientForm(row.spoken));
    });
  }
});
