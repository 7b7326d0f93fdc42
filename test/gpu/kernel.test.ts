import { describe, expect, test } from "bun:test";
import { gpuForTests } from "../../src/gpu/device.ts";
import { BufferUsage, MapMode } from "../../src/gpu/kernel.ts";

describe("kernel plumbing", () => {
  test("the buffer-usage and map-mode flags are the spec's, as the runtime's own globals give them", async () => {
    await gpuForTests();
    const globals = globalThis as unknown as { GPUBufferUsage?: Record<string, number>; GPUMapMode?: Record<string, number> };
    if (!globals.GPUBufferUsage || !globals.GPUMapMode) throw new Error("this runtime's WebGPU binding installs no GPUBufferUsage / GPUMapMode globals to compare with");
    for (const [name, value] of Object.entries(BufferUsage)) expect([name, globals.GPUBufferUsage[name]]).toEqual([name, value]);
    for (const [name, value] of Object.entries(MapMode)) expect([name, globals.GPUMapMode[name]]).toEqual([name, value]);
  });
});
