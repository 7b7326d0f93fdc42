/**
 * Host side of kernels/conv-transpose1d.wgsl: streaming ConvTranspose1d over N streams with an
 * overlap-add `partial` per stream, the bias subtracted from it (docs/pocket-tts.md §1.3). Shapes: input
 * [N, Cin, T], weight [Cin, Cout/groups, K], bias [Cout], partial [slots, Cout, K − S] (row n's in the slot
 * the stream table gives it), output [N, Cout, T·S].
 * The Mimi upsample (§1.5) is the depthwise case, groups = Cin = Cout, without bias.
 */
import { kernelDispatch, linearWorkgroups, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export interface ConvTranspose1dShape {
  batch: number;
  /** Streams whose partials the `partial` buffer holds (≥ batch). */
  slots: number;
  inChannels: number;
  outChannels: number;
  /** Input frames per stream in this call. */
  inLength: number;
  kernelSize: number;
  stride: number;
  groups: number;
  hasBias: boolean;
}

export interface ConvTranspose1dBuffers {
  input: GPUBuffer;
  /** Batch row → state slot (src/gpu/stream-table.ts). */
  streamTable: GPUBuffer;
  /** The streams' overlap-add tails, updated in place. */
  partial: GPUBuffer;
  /** At least N·Cout·(K − S) floats of scratch; may be shared by layers that run one after another. */
  scratch: GPUBuffer;
  weight: GPUBuffer;
  bias?: GPUBuffer;
  output: GPUBuffer;
}

// CHANNELS and FRAMES in kernels/conv-transpose1d.wgsl: each invocation of `main` computes a block of
// output channels × frames of one phase.
const CHANNELS_PER_INVOCATION = 4;
const FRAMES_PER_INVOCATION = 4;

export function convTranspose1dPartialLength(shape: Pick<ConvTranspose1dShape, "kernelSize" | "stride">): number {
  return shape.kernelSize - shape.stride;
}

export function convTranspose1dOutputLength(shape: Pick<ConvTranspose1dShape, "inLength" | "stride">): number {
  return shape.inLength * shape.stride;
}

/** ConvTranspose1dParams of kernels/conv-transpose1d.wgsl, in declaration order. */
export function convTranspose1dUniforms(shape: ConvTranspose1dShape): UniformFields {
  return [
    ["u32", shape.batch],
    ["u32", shape.inChannels],
    ["u32", shape.outChannels],
    ["u32", shape.inLength],
    ["u32", shape.kernelSize],
    ["u32", shape.stride],
    ["u32", shape.groups],
    ["u32", convTranspose1dPartialLength(shape)],
    ["u32", shape.hasBias ? 1 : 0],
  ];
}

/** The call's dispatches in order: output and new partial (to scratch), then scratch into `partial`. */
export function convTranspose1dDispatches(device: GPUDevice, shape: ConvTranspose1dShape, buffers: ConvTranspose1dBuffers): KernelDispatch[] {
  const { batch, slots, inChannels, outChannels, inLength, kernelSize, stride, groups } = shape;
  const partialLength = convTranspose1dPartialLength(shape);
  const outLength = convTranspose1dOutputLength(shape);
  const partialFloats = batch * outChannels * partialLength;
  validateInputs("conv-transpose1d", {
    dims: { batch, slots, inChannels, outChannels, inLength, kernelSize, stride, groups },
    rules: [
      ["slots ≥ batch", slots >= batch, `${batch} streams need at least as many state slots, not ${slots}`],
      ["groups divide the channels", inChannels % groups === 0 && outChannels % groups === 0, `${inChannels} → ${outChannels} channels do not split into ${groups} groups`],
      // Upstream's StreamingConvTranspose1d asserts K ≥ S: with a gap between kernels there is nothing to carry.
      ["kernelSize ≥ stride", kernelSize >= stride, `kernel ${kernelSize} is shorter than the stride ${stride}`],
      ["a bias buffer iff hasBias", shape.hasBias === (buffers.bias !== undefined), `hasBias is ${shape.hasBias} but a bias buffer was${buffers.bias ? "" : " not"} given`],
    ],
    buffers: {
      input: [buffers.input, batch * inChannels * inLength],
      "stream table": [buffers.streamTable, batch * 2],
      partial: [buffers.partial, slots * outChannels * partialLength],
      scratch: [buffers.scratch, partialFloats],
      weight: [buffers.weight, inChannels * (outChannels / groups) * kernelSize],
      bias: [buffers.bias, outChannels],
      output: [buffers.output, batch * outChannels * outLength],
    },
  });
  const uniforms = convTranspose1dUniforms(shape);
  const main = kernelDispatch(
    device,
    { name: "conv-transpose1d", entryPoint: "main" },
    uniforms,
    [
      [1, buffers.input],
      [2, buffers.partial],
      [3, buffers.scratch],
      [4, buffers.weight],
      // Without a bias the binding still needs a buffer (the flag is a runtime value): alias the weight.
      [5, buffers.bias ?? buffers.weight],
      [6, buffers.output],
      [7, buffers.streamTable],
    ],
    [Math.ceil((groups * Math.ceil(outChannels / groups / CHANNELS_PER_INVOCATION) * stride * Math.ceil(Math.ceil((outLength + partialLength) / stride) / FRAMES_PER_INVOCATION)) / 64), batch, 1],
  );
  if (partialFloats === 0) return [main];
  return [main, kernelDispatch(device, { name: "conv-transpose1d", entryPoint: "commit_partial" }, uniforms, [[2, buffers.partial], [3, buffers.scratch], [7, buffers.streamTable]], linearWorkgroups(partialFloats))];
}
