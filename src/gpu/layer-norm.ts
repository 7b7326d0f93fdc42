/**
 * LayerNorm over the last dimension (kernels/layer-norm.wgsl): x [rows, channels] → y [rows, channels],
 * rows = streams · steps. The Mimi transformers use eps 1e-5 (docs/pocket-tts.md §1.4).
 */
import { kernelDispatch, requireFloats, requireShape, type KernelDispatch, type UniformFields } from "./kernel.ts";

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
  requireShape("layerNorm", { rows, channels });
  if (!(eps > 0)) throw new Error(`layerNorm: eps must be positive, got ${eps}`);
  requireFloats(buffers.input, rows * channels, "layerNorm input");
  requireFloats(buffers.output, rows * channels, "layerNorm output");
  requireFloats(buffers.weight, channels, "layerNorm weight");
  requireFloats(buffers.bias, channels, "layerNorm bias");
  return kernelDispatch(device, { name: "layer-norm" }, layerNormUniforms(shape), [buffers.input, buffers.weight, buffers.bias, buffers.output], [rows, 1, 1]);
}
