/** CPU LayerNorm over the last dimension, in float64 then rounded: x [rows, channels] → y. */
import type { LayerNormShape } from "../../../src/gpu/layer-norm.ts";

export function layerNormReference(input: Float32Array, weight: Float32Array, bias: Float32Array, { rows, channels, eps }: LayerNormShape): Float32Array {
  const output = new Float32Array(rows * channels);
  for (let row = 0; row < rows; row++) {
    const base = row * channels;
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += input[base + c]!;
    const mean = sum / channels;
    let squares = 0;
    for (let c = 0; c < channels; c++) squares += (input[base + c]! - mean) ** 2;
    const inverseStd = 1 / Math.sqrt(squares / channels + eps);
    for (let c = 0; c < channels; c++) output[base + c] = (input[base + c]! - mean) * inverseStd * weight[c]! + bias[c]!;
  }
  return output;
}
