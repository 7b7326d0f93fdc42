/** Host side of kernels/elu.wgsl: ELU (α = 1) over `count` floats of any batched tensor. */
import { elementwiseGrid, kernelDispatch, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export function eluUniforms(count: number): UniformFields {
  return [["u32", count]];
}

/** ELU of the first `count` floats of `input` into `output`. */
export function eluDispatch(device: GPUDevice, count: number, input: GPUBuffer, output: GPUBuffer): KernelDispatch {
  validateInputs("elu", {
    rules: [
      ["count is a whole number", Number.isInteger(count) && count >= 0, `count ${count} is not a length`],
      // WebGPU forbids a read-only and a writable binding of one buffer in one dispatch.
      ["input ≠ output", input !== output, "input and output must be different buffers"],
    ],
    buffers: { input: [input, count], output: [output, count] },
  });
  return kernelDispatch(device, { name: "elu" }, eluUniforms(count), [[1, input], [2, output]], elementwiseGrid(device, count, 64));
}
