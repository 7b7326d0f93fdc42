/**
 * Tiled matrix product (kernels/matmul.wgsl): out [rows, cols] = a [rows, inner] · b [inner, cols] + bias,
 * rows = streams · steps. `b` is an nn.Linear weight transposed to [in, out], as the ONNX export stores it;
 * safetensors weights ([out, in]) are transposed once at load.
 */
import { kernelDispatch, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export interface MatmulShape {
  rows: number;
  inner: number;
  cols: number;
}

export interface MatmulBuffers {
  a: GPUBuffer;
  b: GPUBuffer;
  /** [cols], or null for the bias-free projections of the Mimi transformer. */
  bias: GPUBuffer | null;
  out: GPUBuffer;
}

const TILE_ROWS = 16;
const TILE_COLS = 64;

/** Mirrors `MatmulParams`. */
export function matmulUniforms(shape: MatmulShape, hasBias: boolean): UniformFields {
  return [["u32", shape.rows], ["u32", shape.inner], ["u32", shape.cols], ["u32", hasBias ? 1 : 0]];
}

export function matmul(device: GPUDevice, shape: MatmulShape, buffers: MatmulBuffers): KernelDispatch {
  const { rows, inner, cols } = shape;
  validateInputs("matmul", {
    dims: { rows, inner, cols },
    buffers: { a: [buffers.a, rows * inner], b: [buffers.b, inner * cols], out: [buffers.out, rows * cols], bias: [buffers.bias, cols] },
  });
  // With no bias the binding still needs a buffer; `b` is never read through it (has_bias = 0).
  const bias = buffers.bias ?? buffers.b;
  return kernelDispatch(device, { name: "matmul" }, matmulUniforms(shape, buffers.bias !== null), [[1, buffers.a], [2, buffers.b], [3, bias], [4, buffers.out]], [
    Math.ceil(cols / TILE_COLS),
    Math.ceil(rows / TILE_ROWS),
    1,
  ]);
}
