/** CPU matrix product in float64: a [rows, inner] · b [inner, cols] (+ bias [cols]) → [rows, cols]. */
import type { MatmulShape } from "../../../src/gpu/matmul.ts";

export function matmulReference(a: Float32Array, b: Float32Array, bias: Float32Array | null, { rows, inner, cols }: MatmulShape): Float32Array {
  const out = new Float32Array(rows * cols);
  const accumulator = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    if (bias) accumulator.set(bias);
    else accumulator.fill(0);
    for (let k = 0; k < inner; k++) {
      const value = a[r * inner + k]!;
      const bRow = k * cols;
      for (let c = 0; c < cols; c++) accumulator[c]! += value * b[bRow + c]!;
    }
    out.set(accumulator, r * cols);
  }
  return out;
}
