import { describe, expect, test } from "bun:test";
import { acquireGpu } from "../../src/gpu/device.ts";
import { gpuForTests } from "./support.ts";

describe("WebGPU device acquisition", () => {
  test("hands out a self-tested device on a real adapter, never Dawn's Null backend", async () => {
    const context = await gpuForTests();
    expect(context.adapterDescription).not.toContain("null-backend");
    expect(context.backend).toBe("Bun" in globalThis ? "bun-webgpu" : "navigator.gpu");
    // Kernels bind up to 10 storage buffers; the default limit of 8 would refuse them.
    expect(context.device.limits.maxStorageBuffersPerShaderStage).toBeGreaterThanOrEqual(10);
  });

  test("shares one device per process", async () => {
    const first = await gpuForTests();
    const second = await gpuForTests();
    expect(second.device).toBe(first.device);
  });

  test("refuses a software adapter unless allowed", async () => {
    const context = await gpuForTests();
    if (context.isSoftware) {
      await expect(acquireGpu()).rejects.toThrow(/software/);
    } else {
      expect((await acquireGpu()).device).toBe(context.device);
    }
  });
});
