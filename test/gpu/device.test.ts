import { describe, expect, test } from "bun:test";
import { acquireGpu, GpuDeviceLostError, gpuForTests, openGpuContext, whileDeviceAlive } from "../../src/gpu/device.ts";

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

  test("a lost device turns a pending wait into an Error instead of a hang", async () => {
    const context = await openGpuContext();
    const neverSettles = new Promise<never>(() => undefined);
    const waiting = whileDeviceAlive(context.device, neverSettles);
    context.device.destroy();
    const error = await waiting.then(
      () => null,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(GpuDeviceLostError);
    expect((error as GpuDeviceLostError).reason).toBe("destroyed");
  });

  test("work that finishes first is returned unchanged", async () => {
    const context = await gpuForTests();
    expect(await whileDeviceAlive(context.device, Promise.resolve(42))).toBe(42);
  });
});
