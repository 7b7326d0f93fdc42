/**
 * Batched transpose (kernels/transpose.wgsl): input [batch, rows, cols] → output [batch, cols, rows], the
 * switch between the convolutions' channels-first [N, C, T] and the transformer's time-major [N, T, C].
 */
import { kernelDispatch, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export interface TransposeShape {
  batch: number;
  rows: number;
  cols: number;
}

const TILE = 16;

/** Mirrors `TransposeParams`. */
export function transposeUniforms(shape: TransposeShape): UniformFields {
  return [["u32", shape.batch], ["u32", shape.rows], ["u32", shape.cols]];
}

export function transpose(device: GPUDevice, shape: TransposeShape, buffers: { input: GPUBuffer; output: GPUBuffer }): KernelDispatch {
  const { batch, rows, cols } = shape;
  validateInputs("transpose", { dims: { batch, rows, cols }, buffers: { input: [buffers.input, batch * rows * cols], output: [buffers.output, batch * rows * cols] } });
  return kernelDispatch(device, { name: "transpose" }, transposeUniforms(shape), [[1, buffers.input], [2, buffers.output]], [Math.ceil(cols / TILE), Math.ceil(rows / TILE), batch]);
}
