/** CPU batched transpose: [batch, rows, cols] → [batch, cols, rows]. */
import type { TransposeShape } from "../../../src/gpu/transpose.ts";

export function transposeReference(input: Float32Array, { batch, rows, cols }: TransposeShape): Float32Array {
  const output = new Float32Array(batch * rows * cols);
  for (let n = 0; n < batch; n++) {
    const base = n * rows * cols;
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) output[base + c * rows + r] = input[base + r * cols + c]!;
  }
  return output;
}
