/** Host side of kernels/elu.wgsl: ELU (α = 1) over `count` floats of any batched tensor. */
import { kernelDispatch, requireFloats, type KernelDispatch, type UniformFields } from "./kernel.ts";

export function eluUniforms(count: number): UniformFields {
  return [["u32", count]];
}

/** x workgroups up to the per-dimension limit, rows of them along y beyond that. */
export function eluWorkgroups(count: number, perDimensionLimit: number): [number, number, number] {
  const total = Math.ceil(count / 64);
  const x = Math.max(1, Math.min(total, perDimensionLimit));
  return [total === 0 ? 0 : x, Math.ceil(total / x), 1];
}

/** ELU of the first `count` floats of `input` into `output`. */
export function eluDispatch(device: GPUDevice, count: number, input: GPUBuffer, output: GPUBuffer): KernelDispatch {
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`elu: count ${count} is not a length`);
  if (input === output) throw new Error("elu: input and output must be different buffers (WebGPU forbids a read-only and a writable binding of one buffer)");
  requireFloats(input, count, "elu input");
  requireFloats(output, count, "elu output");
  return kernelDispatch(device, { name: "elu" }, eluUniforms(count), [input, output], eluWorkgroups(count, device.limits.maxComputeWorkgroupsPerDimension));
}
