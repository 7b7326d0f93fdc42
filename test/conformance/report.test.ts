import { describe, expect, test } from "bun:test";
import { compareTensors } from "../../src/conformance/report.ts";

describe("compareTensors", () => {
  test("relRms = rms(a − b) / rms(b); NaN in both places counts as equal", () => {
    expect(compareTensors([1, 2, NaN], [1, 2, NaN])).toEqual({ maxAbs: 0, relRms: 0 });
    const { maxAbs, relRms } = compareTensors([3, 4], [3, 5]);
    expect(maxAbs).toBe(1);
    expect(relRms).toBeCloseTo(Math.sqrt(1 / 34), 12);
  });

  test("a NaN on one side or a length mismatch never passes", () => {
    expect(Number.isNaN(compareTensors([NaN], [1]).relRms)).toBe(true);
    expect(compareTensors([1], [1, 2]).relRms).toBe(Infinity);
    expect(compareTensors([1], [0]).relRms).toBe(Infinity);
  });
});
