import { describe, expect, test } from "bun:test";
import { normalizeText } from "../../../src/text/normalize/index.ts";
import { CASES, CLASSES } from "./cases.ts";
import { lenientForm } from "./lenient.ts";

describe("normalization table", () => {
  test("has at least 300 cases covering every class", () => {
    expect(CASES.length).toBeGreaterThanOrEqual(300);
    for (const caseClass of CLASSES) expect(CASES.filter((row) => row.class === caseClass).length).toBeGreaterThanOrEqual(10);
  });

  for (const row of CASES) {
    test(`${row.class}: ${row.written}`, () => {
      expect(lenientForm(normalizeText(row.written))).toBe(lenientForm(row.spoken));
    });
  }
});
