import { describe, expect, test } from "bun:test";
import { openGpuContext } from "../../src/gpu/device.ts";
import { BufferUsage, GpuDeviceLostError, kernelDispatch, KernelInputError, MapMode, storageBuffer, submitAndReadBack, validateInputs, whileDeviceAlive } from "../../src/gpu/kernel.ts";
import { brokenRule, gpuForTests } from "./support.ts";

describe("kernel plumbing", () => {
  test("the buffer-usage and map-mode flags are the spec's, as the runtime's own globals give them", async () => {
    await gpuForTests();
    const globals = globalThis as unknown as { GPUBufferUsage?: Record<string, number>; GPUMapMode?: Record<string, number> };
    if (!globals.GPUBufferUsage || !globals.GPUMapMode) throw new Error("this runtime's WebGPU binding installs no GPUBufferUsage / GPUMapMode globals to compare with");
    for (const [name, value] of Object.entries(BufferUsage)) expect([name, globals.GPUBufferUsage[name]]).toEqual([name, value]);
    for (const [name, value] of Object.entries(MapMode)) expect([name, globals.GPUMapMode[name]]).toEqual([name, value]);
  });
});

describe("validateInputs", () => {
  test("names the first broken rule: dims, then the kernel's own rules, then buffer sizes", async () => {
    const { device } = await gpuForTests();
    const sixteenFloats = storageBuffer(device, 64);
    const rule = (holds: boolean) => ["slots ≥ batch", holds, "2 streams need at least as many state slots, not 1"] as const;
    expect(brokenRule(() => validateInputs("op", { dims: { batch: 2, length: 0 }, rules: [rule(false)] }))).toBe("length is a positive integer");
    expect(brokenRule(() => validateInputs("op", { dims: { batch: 2.5 } }))).toBe("batch is a positive integer");
    expect(brokenRule(() => validateInputs("op", { dims: { batch: 2 }, rules: [rule(true), rule(false)], buffers: { input: [sixteenFloats, 17] } }))).toBe("slots ≥ batch");
    expect(brokenRule(() => validateInputs("op", { dims: { batch: 2 }, buffers: { input: [sixteenFloats, 16], weight: [sixteenFloats, 17] } }))).toBe("weight holds the shape");
  });

  test("accepts what holds, skips absent optional buffers, and says kernel, numbers and rule in its message", async () => {
    const { device } = await gpuForTests();
    const sixteenFloats = storageBuffer(device, 64);
    expect(() => validateInputs("op", { dims: { batch: 1 }, rules: [["always", true, ""]], buffers: { input: [sixteenFloats, 16], bias: [undefined, 1000], residual: [null, 1000] } })).not.toThrow();
    const error = (() => {
      try {
        validateInputs("conv1d", { buffers: { weight: [sixteenFloats, 17] } });
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(KernelInputError);
    expect(error).toBeInstanceOf(RangeError);
    expect((error as KernelInputError).message).toBe("conv1d: the weight buffer of 64 bytes is smaller than the 17 floats it must hold (rule: weight holds the shape)");
  });
});

describe("kernelDispatch", () => {
  test("binds buffers at their WGSL binding numbers, refusing binding 0 (the uniforms'), a repeated number and workgroups past the device limit", async () => {
    const { device } = await gpuForTests();
    const input = storageBuffer(device, 64);
    const output = storageBuffer(device, 64);
    const elu = { name: "elu" };
    const dispatch = kernelDispatch(device, elu, [["u32", 16]], [[1, input], [2, output]], [1, 1, 1]);
    expect(dispatch.label).toBe("elu");
    expect(kernelDispatch(device, { name: "conv1d", entryPoint: "save_tail" }, [["u32", 1]], [[2, input], [3, output], [8, storageBuffer(device, 16)]], [1, 1, 1]).label).toBe("conv1d.save_tail");
    expect(brokenRule(() => kernelDispatch(device, elu, [["u32", 16]], [[0, input], [2, output]], [1, 1, 1]))).toBe("bindings are distinct and ≥ 1");
    expect(brokenRule(() => kernelDispatch(device, elu, [["u32", 16]], [[1, input], [1, output]], [1, 1, 1]))).toBe("bindings are distinct and ≥ 1");
    const limit = device.limits.maxComputeWorkgroupsPerDimension;
    expect(brokenRule(() => kernelDispatch(device, elu, [["u32", 16]], [[1, input], [2, output]], [limit + 1, 1, 1]))).toBe("workgroups ≤ maxComputeWorkgroupsPerDimension");
  });
});

async function rejection(work: Promise<unknown>): Promise<unknown> {
  return work.then(
    () => null,
    (reason: unknown) => reason,
  );
}

describe("waiting on the GPU", () => {
  test("a lost device turns a pending wait into an Error instead of a hang", async () => {
    const context = await openGpuContext();
    const neverSettles = new Promise<never>(() => undefined);
    const waiting = whileDeviceAlive(context.device, neverSettles);
    context.device.destroy();
    const error = await rejection(waiting);
    expect(error).toBeInstanceOf(GpuDeviceLostError);
    expect((error as GpuDeviceLostError).reason).toBe("destroyed");
  });

  test("work that finishes first is returned unchanged", async () => {
    const context = await gpuForTests();
    expect(await whileDeviceAlive(context.device, Promise.resolve(42))).toBe(42);
  });

  test("a readback returns each source's floats after the encoder's own work, in one submission", async () => {
    const { device } = await gpuForTests();
    const first = storageBuffer(device, Float32Array.of(1, 2, 3, 4, 5));
    const second = storageBuffer(device, 16 * 4);
    const encoder = device.createCommandEncoder();
    // Recorded before the readback's copies, so the second source must show it.
    encoder.copyBufferToBuffer(first, 0, second, 4, 8);
    const [head, shifted, none] = await submitAndReadBack(device, encoder, [
      { buffer: first, floats: 3 },
      { buffer: second, floats: 4 },
      { buffer: first, floats: 0 },
    ]);
    expect(Array.from(head!)).toEqual([1, 2, 3]);
    expect(Array.from(shifted!)).toEqual([0, 1, 2, 0]);
    expect(none!.length).toBe(0);
    const refused = await rejection(submitAndReadBack(device, device.createCommandEncoder(), [{ buffer: first, floats: 9 }]));
    expect(refused).toBeInstanceOf(KernelInputError);
    expect((refused as KernelInputError).rule).toBe("source 0 holds the shape");
  });

  test("a readback on a device lost while it waits rejects with GpuDeviceLostError", async () => {
    const { device } = await openGpuContext();
    const large = storageBuffer(device, new Float32Array(1 << 20));
    const reading = submitAndReadBack(device, device.createCommandEncoder(), [{ buffer: large, floats: 1 << 20 }]);
    device.destroy();
    const error = await rejection(reading);
    expect(error).toBeInstanceOf(GpuDeviceLostError);
  });

  test("a readback on a device already lost rejects with GpuDeviceLostError, not the binding's symptom", async () => {
    const { device } = await openGpuContext();
    const buffer = storageBuffer(device, 64);
    device.destroy();
    await device.lost;
    const error = await rejection(submitAndReadBack(device, device.createCommandEncoder(), [{ buffer, floats: 16 }]));
    expect(error).toBeInstanceOf(GpuDeviceLostError);
    expect((error as GpuDeviceLostError).reason).toBe("destroyed");
  });
});
