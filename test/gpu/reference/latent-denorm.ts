/** Plain TypeScript reference of kernels/latent-denorm.wgsl: [N, T, D] normalised → [N, D, T] denormalised. */
import type { LatentDenormShape } from "../../../src/gpu/latent-denorm.ts";

export function referenceLatentDenorm(shape: LatentDenormShape, latents: Float32Array, embStd: Float32Array, embMean: Float32Array): Float32Array {
  const { batch, latentDim, frames } = shape;
  const output = new Float32Array(batch * latentDim * frames);
  for (let n = 0; n < batch; n++) {
    for (let t = 0; t < frames; t++) {
      for (let d = 0; d < latentDim; d++) output[(n * latentDim + d) * frames + t] = latents[(n * frames + t) * latentDim + d]! * embStd[d]! + embMean[d]!;
    }
  }
  return output;
}
