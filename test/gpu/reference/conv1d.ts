/**
 * Plain TypeScript reference of the causal streaming Conv1d (kernels/conv1d.wgsl, docs/pocket-tts.md
 * §1.3): the kernel tests' ground truth, in float64 accumulation.
 */
import { conv1dOutputLength, conv1dTailLength, type Conv1dShape } from "../../../src/gpu/conv1d.ts";

/**
 * One call: returns the output [N, Cout, T / stride] and the new tails [N, Cin, tailLength]. `firstCall[n]`
 * marks streams whose state is fresh, which replicate padding pads with their first input frame.
 */
export function referenceConv1d(
  shape: Conv1dShape,
  input: Float32Array,
  previous: Float32Array,
  weight: Float32Array,
  bias?: Float32Array,
  residual?: Float32Array,
  firstCall: readonly boolean[] = [],
): { output: Float32Array; previous: Float32Array } {
  const { batch, inChannels, outChannels, inLength, kernelSize, stride, dilation, groups } = shape;
  const tailLength = conv1dTailLength(shape);
  const outLength = conv1dOutputLength(shape);
  const inPerGroup = inChannels / groups;
  const outPerGroup = outChannels / groups;
  const concatenated = (n: number, channel: number, position: number): number => {
    if (position >= tailLength) return input[(n * inChannels + channel) * inLength + position - tailLength]!;
    if (shape.padMode === "replicate" && firstCall[n]) return input[(n * inChannels + channel) * inLength]!;
    return previous[(n * inChannels + channel) * tailLength + position]!;
  };
  const output = new Float32Array(batch * outChannels * outLength);
  for (let n = 0; n < batch; n++) {
    for (let co = 0; co < outChannels; co++) {
      const firstIn = Math.floor(co / outPerGroup) * inPerGroup;
      for (let t = 0; t < outLength; t++) {
        let sum = bias ? bias[co]! : 0;
        for (let ci = 0; ci < inPerGroup; ci++) {
          for (let k = 0; k < kernelSize; k++) sum += weight[(co * inPerGroup + ci) * kernelSize + k]! * concatenated(n, firstIn + ci, t * stride + k * dilation);
        }
        const index = (n * outChannels + co) * outLength + t;
        output[index] = sum + (residual ? residual[index]! : 0);
      }
    }
  }
  const nextPrevious = new Float32Array(batch * inChannels * tailLength);
  for (let n = 0; n < batch; n++) {
    for (let channel = 0; channel < inChannels; channel++) {
      for (let j = 0; j < tailLength; j++) nextPrevious[(n * inChannels + channel) * tailLength + j] = concatenated(n, channel, inLength + j);
    }
  }
  return { output, previous: nextPrevious };
}
