/** Host side of kernels/elu.wgsl: ELU (α = 1) over `count` floats of any batched tensor. */
import { elementwiseGrid, kernelDispatch, requireFloats, type KernelDispatch, type UniformFields } from "./kernel.ts";

export function eluUniforms(count: number): UniformFields {
  return [["u32", count]];
}

/** ELU of the first `count` floats of `input` into `output`. */
export function eluDispatch(device: GPUDevice, count: number, input: GPUBuffer, output: GPUBuffer): KernelDispatch {
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`elu: count ${count} is not a length`);
  if (input === output) throw new Error("elu: input and output must be different buffers (WebGPU forbids a read-only and a writable binding of one buffer)");
  requireFloats(input, count, "elu input");
  requireFloats(output, count, "elu output");
  return kernelDispatch(device, { name: "elu" }, eluUniforms(count), [input, output], elementwiseGrid(device, count, 64));
}
