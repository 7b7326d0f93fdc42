/**
 * Helpers for the WGSL kernel tests: the device they run on, one-off submission and readback, reproducible
 * random inputs and an element-wise closeness check that names the worst element, so a failing kernel says
 * where and by how much it is off. No bun:test import: test/gpu/deno/decode-check.ts runs it under Deno.
 */
import { acquireGpu, type GpuContext } from "../../src/gpu/device.ts";
import { encodeDispatches, KernelInputError, loadKernel, submitAndReadBack, type KernelDispatch } from "../../src/gpu/kernel.ts";
import { seededRandom } from "../../src/lib/seeded-random.ts";

export { seededRandom };

/**
 * The device the kernel tests run on: software adapters welcome. Fails (never skips) with the package to
 * install when the machine has no usable adapter.
 */
export async function gpuForTests(): Promise<GpuContext> {
  try {
    return await acquireGpu({ allowSoftware: true });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`no usable WebGPU device for the kernel tests: ${reason}`);
  }
}

/** Runs dispatches as one submission in a pass of their own. */
export function submitDispatches(device: GPUDevice, dispatches: readonly KernelDispatch[]): void {
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  encodeDispatches(pass, dispatches);
  pass.end();
  device.queue.submit([encoder.finish()]);
}

/** The first `length` floats of a storage buffer, after all submitted work. */
export async function readFloat32(device: GPUDevice, buffer: GPUBuffer, length: number): Promise<Float32Array> {
  const [values] = await submitAndReadBack(device, device.createCommandEncoder(), [{ buffer, floats: length }]);
  return values!;
}


/** `n` floats drawn uniformly from [-scale, scale). */
export function randomArray(rand: () => number, n: number, scale = 1): Float32Array {
  const values = new Float32Array(n);
  for (let i = 0; i < n; i++) values[i] = (2 * rand() - 1) * scale;
  return values;
}

export interface Tolerance {
  atol: number;
  rtol: number;
  label: string;
}

/**
 * Throws unless |actual − expected| ≤ atol + rtol·|expected| everywhere (NaN never passes). The message names
 * the element that exceeds its bound the most, with both values and the difference.
 */
export function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, { atol, rtol, label }: Tolerance): void {
  if (actual.length !== expected.length) throw new Error(`${label}: got ${actual.length} values, expected ${expected.length}`);
  let worstIndex = -1;
  let worstExcess = 0;
  let maxDifference = 0;
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const b = expected[i]!;
    const difference = Math.abs(a - b);
    const excess = Number.isNaN(difference) ? Infinity : difference - (atol + rtol * Math.abs(b));
    if (difference > maxDifference) maxDifference = difference;
    if (excess > worstExcess) {
      worstExcess = excess;
      worstIndex = i;
    }
  }
  if (worstIndex >= 0) {
    const a = actual[worstIndex]!;
    const b = expected[worstIndex]!;
    throw new Error(
      `${label}: element ${worstIndex} of ${expected.length} is ${a}, expected ${b} (|a-b| = ${Math.abs(a - b)} > atol ${atol} + rtol ${rtol}·|b|); max |a-b| over all elements ${maxDifference}`,
    );
  }
}

/**
 * The byte size of a WGSL uniform struct made of 4-byte scalars in a kernel file (members only, before the
 * uniform binding's 16-byte rounding): each host module's test pins its packed field list to it.
 */
export function wgslStructByteSize(kernelName: string, structName: string): number {
  const source = loadKernel(kernelName);
  const match = new RegExp(`struct\\s+${structName}\\s*\\{([^}]*)\\}`).exec(source);
  if (!match) throw new Error(`struct ${structName} not found in kernels/${kernelName}.wgsl`);
  const fields = match[1]!.split(",").map((field) => field.trim()).filter((field) => field.length > 0);
  for (const field of fields) {
    if (!/:\s*(u32|f32|i32)$/.test(field)) throw new Error(`kernels/${kernelName}.wgsl ${structName}.${field} is not a 4-byte scalar`);
  }
  return fields.length * 4;
}

/** The rule a kernel host's check names when `build` is refused; throws when nothing (or something else) is. */
export function brokenRule(build: () => unknown): string {
  try {
    build();
  } catch (error) {
    if (error instanceof KernelInputError) return error.rule;
    throw error;
  }
  throw new Error("the call was accepted; expected a KernelInputError");
}
