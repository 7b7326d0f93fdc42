/**
 * Plain TypeScript reference of the streaming ConvTranspose1d (kernels/conv-transpose1d.wgsl,
 * docs/pocket-tts.md §1.3), written the way upstream's StreamingConvTranspose1d computes it: full
 * transposed conv, add the partial, emit T·S frames, keep the rest minus the bias.
 */
import { convTranspose1dPartialLength, type ConvTranspose1dShape } from "../../../src/gpu/conv-transpose1d.ts";

export function referenceConvTranspose1d(
  shape: ConvTranspose1dShape,
  input: Float32Array,
  partial: Float32Array,
  weight: Float32Array,
  bias?: Float32Array,
): { output: Float32Array; partial: Float32Array } {
  const { batch, inChannels, outChannels, inLength, kernelSize, stride, groups } = shape;
  const partialLength = convTranspose1dPartialLength(shape);
  const inPerGroup = inChannels / groups;
  const outPerGroup = outChannels / groups;
  const fullLength = (inLength - 1) * stride + kernelSize;
  const emitted = inLength * stride;
  const output = new Float32Array(batch * outChannels * emitted);
  const nextPartial = new Float32Array(batch * outChannels * partialLength);
  const full = new Float64Array(fullLength);
  for (let n = 0; n < batch; n++) {
    for (let co = 0; co < outChannels; co++) {
      const group = Math.floor(co / outPerGroup);
      full.fill(bias ? bias[co]! : 0);
      for (let ci = group * inPerGroup; ci < (group + 1) * inPerGroup; ci++) {
        for (let t = 0; t < inLength; t++) {
          const x = input[(n * inChannels + ci) * inLength + t]!;
          for (let k = 0; k < kernelSize; k++) full[t * stride + k]! += x * weight[(ci * outPerGroup + (co % outPerGroup)) * kernelSize + k]!;
        }
      }
      const row = n * outChannels + co;
      for (let j = 0; j < partialLength; j++) full[j]! += partial[row * partialLength + j]!;
      for (let u = 0; u < emitted; u++) output[row * emitted + u] = full[u]!;
      for (let j = 0; j < partialLength; j++) nextPartial[row * partialLength + j] = full[fullLength - partialLength + j]! - (bias ? bias[co]! : 0);
    }
  }
  return { output, partial: nextPartial };
}
