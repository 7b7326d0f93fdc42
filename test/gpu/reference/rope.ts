/**
 * CPU interleaved RoPE on the q and k parts of qkv [streams, steps, 3, heads, headDim], returning a new
 * array. The angle is formed in float32 exactly as upstream (`freqs * ts`, §1.9) and its cos/sin taken in
 * float64, so the reference carries no reduction error of its own.
 */
import { ropeFrequencies, type RopeShape } from "../../../src/gpu/rope.ts";

export function ropeReference(qkv: Float32Array, offsets: readonly number[], shape: RopeShape & { maxPeriod: number }): Float32Array {
  const { streams, steps, heads, headDim, maxPeriod } = shape;
  const frequencies = ropeFrequencies(headDim, maxPeriod);
  const output = qkv.slice();
  const width = heads * headDim;
  for (let n = 0; n < streams; n++) {
    for (let t = 0; t < steps; t++) {
      const position = Math.fround(offsets[n]! + t);
      const row = (n * steps + t) * 3 * width;
      for (let i = 0; i < headDim / 2; i++) {
        const angle = Math.fround(position * frequencies[i]!);
        const cos = Math.cos(angle);
        const sin = Math.sin(angle);
        for (let part = 0; part < 2; part++) {
          for (let h = 0; h < heads; h++) {
            const index = row + part * width + h * headDim + 2 * i;
            const real = qkv[index]!;
            const imaginary = qkv[index + 1]!;
            output[index] = real * cos - imaginary * sin;
            output[index + 1] = real * sin + imaginary * cos;
          }
        }
      }
    }
  }
  return output;
}
