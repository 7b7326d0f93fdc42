/**
 * Layer-scale residual in place (kernels/layer-scale.wgsl): residual [rows, channels] += scale [channels] ⊙
 * update [rows, channels], the `x + layer_scale(update)` closing each half of a Mimi transformer layer.
 */
import { elementwiseGrid, kernelDispatch, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export interface LayerScaleShape {
  rows: number;
  channels: number;
}

export interface LayerScaleBuffers {
  update: GPUBuffer;
  scale: GPUBuffer;
  residual: GPUBuffer;
}

// The WGSL WORKGROUP_SIZE.
const WORKGROUP_SIZE = 256;

/** Mirrors `LayerScaleParams`. */
export function layerScaleUniforms(shape: LayerScaleShape): UniformFields {
  return [["u32", shape.rows * shape.channels], ["u32", shape.channels]];
}

export function layerScale(device: GPUDevice, shape: LayerScaleShape, buffers: LayerScaleBuffers): KernelDispatch {
  const { rows, channels } = shape;
  validateInputs("layer-scale", {
    dims: { rows, channels },
    buffers: { update: [buffers.update, rows * channels], residual: [buffers.residual, rows * channels], scale: [buffers.scale, channels] },
  });
  return kernelDispatch(device, { name: "layer-scale" }, layerScaleUniforms(shape), [[1, buffers.update], [2, buffers.scale], [3, buffers.residual]], elementwiseGrid(device, rows * channels, WORKGROUP_SIZE));
}
