/** Exact (erf) GELU in place over `count` floats (kernels/gelu.wgsl), the Mimi transformers' FFN activation (docs/pocket-tts.md §1.4). */
import { elementwiseGrid, kernelDispatch, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

// The WGSL WORKGROUP_SIZE.
const WORKGROUP_SIZE = 256;

/** Mirrors `GeluParams`; `zero` stays 0, a value the shader compiler cannot fold (gelu.wgsl `opaque`). */
export function geluUniforms(count: number): UniformFields {
  return [["u32", count], ["u32", 0]];
}

export function gelu(device: GPUDevice, count: number, values: GPUBuffer): KernelDispatch {
  validateInputs("gelu", { dims: { count }, buffers: { values: [values, count] } });
  return kernelDispatch(device, { name: "gelu" }, geluUniforms(count), [[1, values]], elementwiseGrid(device, count, WORKGROUP_SIZE));
}
