import { describe, expect, test } from "bun:test";
import { knownCpuPlacement } from "../../../../src/models/pocket/decoder/choice.ts";

describe("knownCpuPlacement", () => {
  test("--device cpu puts everything on the CPU unless the WGSL decoder is forced", () => {
    expect(knownCpuPlacement({ device: "cpu" })).toBe(true);
    expect(knownCpuPlacement({ device: "cpu", decoder: "onnx" })).toBe(true);
    expect(knownCpuPlacement({ device: "cpu", decoder: "wgsl" })).toBe(false);
  });

  test("--device gpu is never known to be CPU-only", () => {
    expect(knownCpuPlacement({ device: "gpu" })).toBe(false);
    expect(knownCpuPlacement({ device: "gpu", decoder: "onnx" })).toBe(false);
  });

  test("a forced WGSL decoder is never CPU-only, whatever the device policy", () => {
    expect(knownCpuPlacement({ decoder: "wgsl" })).toBe(false);
    expect(knownCpuPlacement({ device: "auto", decoder: "wgsl" })).toBe(false);
  });
});
