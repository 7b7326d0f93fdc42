/**
 * LayerNorm over the last dimension (kernels/layer-norm.wgsl): x [rows, channels] → y [rows, channels],
 * rows = streams · steps. The Mimi transformers use eps 1e-5 (docs/pocket-tts.md §1.4).
 */
import { kernelDispatch, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export interface LayerNormShape {
  rows: number;
  channels: number;
  eps: number;
}

export interface LayerNormBuffers {
  input: GPUBuffer;
  weight: GPUBuffer;
  bias: GPUBuffer;
  output: GPUBuffer;
}

/** Mirrors `LayerNormParams`. */
export function layerNormUniforms(shape: LayerNormShape): UniformFields {
  return [["u32", shape.rows], ["u32", shape.channels], ["f32", shape.eps]];
}

export function layerNorm(device: GPUDevice, shape: LayerNormShape, buffers: LayerNormBuffers): KernelDispatch {
  const { rows, channels, eps } = shape;
  validateInputs("layer-norm", {
    dims: { rows, channels },
    rules: [["eps > 0", eps > 0, `eps = ${eps}`]],
    buffers: { input: [buffers.input, rows * channels], output: [buffers.output, rows * channels], weight: [buffers.weight, channels], bias: [buffers.bias, channels] },
  });
  return kernelDispatch(device, { name: "layer-norm" }, layerNormUniforms(shape), [[1, buffers.input], [2, buffers.weight], [3, buffers.bias], [4, buffers.output]], [rows, 1, 1]);
}
