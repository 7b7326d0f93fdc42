/**
 * Interleaved rotary embedding in place on the q and k parts of qkv [streams, steps, 3, heads, head_dim]
 * (kernels/rope.wgsl, docs/pocket-tts.md §1.9), at positions offset[stream] + step from the stream table.
 */
import { kernelDispatch, storageBuffer, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export interface RopeShape {
  streams: number;
  steps: number;
  heads: number;
  headDim: number;
}

/**
 * freq_i = exp(i · (−2 ln(maxPeriod) / headDim)) for i < headDim/2, rounded to float32 at each step as
 * upstream's `torch.exp(ds * (-math.log(max_period) * 2 / D))` on a float32 `ds`.
 */
export function ropeFrequencies(headDim: number, maxPeriod: number): Float32Array {
  const coefficient = Math.fround((-Math.log(maxPeriod) * 2) / headDim);
  const frequencies = new Float32Array(headDim / 2);
  for (let i = 0; i < frequencies.length; i++) frequencies[i] = Math.exp(Math.fround(i * coefficient));
  return frequencies;
}

export function ropeFrequencyBuffer(device: GPUDevice, headDim: number, maxPeriod: number): GPUBuffer {
  return storageBuffer(device, ropeFrequencies(headDim, maxPeriod), "rope frequencies");
}

/** Mirrors `RopeParams`. */
export function ropeUniforms(shape: RopeShape): UniformFields {
  return [["u32", shape.streams], ["u32", shape.steps], ["u32", shape.heads], ["u32", shape.headDim]];
}

const WORKGROUP_SIZE = 64;

export function rope(device: GPUDevice, shape: RopeShape, buffers: { streamTable: GPUBuffer; frequencies: GPUBuffer; qkv: GPUBuffer }): KernelDispatch {
  const { streams, steps, heads, headDim } = shape;
  validateInputs("rope", {
    dims: { streams, steps, heads, headDim },
    rules: [["headDim is even", headDim % 2 === 0, `head_dim ${headDim} is odd; RoPE rotates pairs`]],
    buffers: { qkv: [buffers.qkv, streams * steps * 3 * heads * headDim], frequencies: [buffers.frequencies, headDim / 2], "stream table": [buffers.streamTable, streams * 2] },
  });
  return kernelDispatch(device, { name: "rope" }, ropeUniforms(shape), [[1, buffers.streamTable], [2, buffers.frequencies], [3, buffers.qkv]], [
    Math.ceil((heads * headDim) / 2 / WORKGROUP_SIZE),
    steps,
    streams,
  ]);
}
