/**
 * Layer-scale residual in place (kernels/layer-scale.wgsl): residual [rows, channels] += scale [channels] ⊙
 * update [rows, channels], the `x + layer_scale(update)` closing each half of a Mimi transformer layer.
 */
import { elementwiseGrid, kernelDispatch, requireFloats, requireShape, type KernelDispatch, type UniformFields } from "./kernel.ts";

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
  requireShape("layerScale", { rows, channels });
  requireFloats(buffers.update, rows * channels, "layerScale update");
  requireFloats(buffers.residual, rows * channels, "layerScale residual");
  requireFloats(buffers.scale, channels, "layerScale scale");
  return kernelDispatch(device, { name: "layer-scale" }, layerScaleUniforms(shape), [buffers.update, buffers.scale, buffers.residual], elementwiseGrid(device, rows * channels, WORKGROUP_SIZE));
}
