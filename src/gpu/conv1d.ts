/**
 * Host side of kernels/conv1d.wgsl: causal streaming Conv1d over N streams with a carried `previous` tail
 * per stream (docs/pocket-tts.md §1.3). Shapes: input [N, Cin, T], weight [Cout, Cin/groups, K], bias
 * [Cout], previous [slots, Cin, (K − 1)·dilation + 1 − stride] (row n's tail in the slot the stream table
 * gives it), residual and output [N, Cout, T / stride].
 * The 1×1 output projection of the Mimi quantizer is the K = 1 case (no tail).
 */
import { elementwiseGrid, kernelDispatch, linearWorkgroups, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export interface Conv1dShape {
  batch: number;
  /** Streams whose tails the `previous` buffer holds (≥ batch). */
  slots: number;
  inChannels: number;
  outChannels: number;
  /** Input frames per stream in this call; a multiple of the stride. */
  inLength: number;
  kernelSize: number;
  stride: number;
  dilation: number;
  groups: number;
  hasBias: boolean;
  /** Adds a residual tensor shaped like the output (a ResBlock's skip connection). */
  hasResidual: boolean;
  /**
   * Causal padding of a stream's first call (stream-table offset 0): zeros ("constant", every decoder conv)
   * or copies of the first input frame ("replicate", the encoder's downsample, §1.2).
   */
  padMode: "constant" | "replicate";
}

export interface Conv1dBuffers {
  input: GPUBuffer;
  /** Batch row → state slot (src/gpu/stream-table.ts). */
  streamTable: GPUBuffer;
  /** The streams' carried tails, updated in place. */
  previous: GPUBuffer;
  /**
   * The [previous, input] window, at least N·Cin·(tailLength + T) floats (`conv1dWindowFloats`); may be
   * shared by layers that run one after another. Unused without a tail.
   */
  window: GPUBuffer;
  weight: GPUBuffer;
  bias?: GPUBuffer;
  residual?: GPUBuffer;
  output: GPUBuffer;
}

// FRAMES and CHANNELS in kernels/conv1d.wgsl: each invocation of `main` computes a block of output frames × channels.
const FRAMES_PER_INVOCATION = 4;
const CHANNELS_PER_INVOCATION = 4;

/** Frames of input the next call needs from this one: k_eff − stride (§1.3). */
export function conv1dTailLength(shape: Pick<Conv1dShape, "kernelSize" | "dilation" | "stride">): number {
  return (shape.kernelSize - 1) * shape.dilation + 1 - shape.stride;
}

/** Floats of the window buffer a call needs. */
export function conv1dWindowFloats(shape: Pick<Conv1dShape, "batch" | "inChannels" | "inLength" | "kernelSize" | "dilation" | "stride">): number {
  return shape.batch * shape.inChannels * (conv1dTailLength(shape) + shape.inLength);
}

export function conv1dOutputLength(shape: Pick<Conv1dShape, "inLength" | "stride">): number {
  return shape.inLength / shape.stride;
}

/** Conv1dParams of kernels/conv1d.wgsl, in declaration order. */
export function conv1dUniforms(shape: Conv1dShape): UniformFields {
  return [
    ["u32", shape.batch],
    ["u32", shape.inChannels],
    ["u32", shape.outChannels],
    ["u32", shape.inLength],
    ["u32", conv1dOutputLength(shape)],
    ["u32", shape.kernelSize],
    ["u32", shape.stride],
    ["u32", shape.dilation],
    ["u32", shape.groups],
    ["u32", conv1dTailLength(shape)],
    ["u32", shape.hasBias ? 1 : 0],
    ["u32", shape.hasResidual ? 1 : 0],
    ["u32", shape.padMode === "replicate" ? 1 : 0],
  ];
}

/** The call's dispatches in order: window assembly, output, new tails (only the output without a tail). */
export function conv1dDispatches(device: GPUDevice, shape: Conv1dShape, buffers: Conv1dBuffers): KernelDispatch[] {
  const { batch, slots, inChannels, outChannels, inLength, kernelSize, stride, dilation, groups } = shape;
  const outLength = conv1dOutputLength(shape);
  const tailLength = conv1dTailLength(shape);
  const tailFloats = batch * inChannels * tailLength;
  validateInputs("conv1d", {
    dims: { batch, slots, inChannels, outChannels, inLength, kernelSize, stride, dilation, groups },
    rules: [
      ["slots ≥ batch", slots >= batch, `${batch} streams need at least as many state slots, not ${slots}`],
      ["groups divide the channels", inChannels % groups === 0 && outChannels % groups === 0, `${inChannels} → ${outChannels} channels do not split into ${groups} groups`],
      ["stride divides inLength", inLength % stride === 0, `input length ${inLength} is not a multiple of the stride ${stride} (streaming convs take whole strides)`],
      ["stride ≤ effective kernel", tailLength >= 0, `stride ${stride} exceeds the effective kernel ${(kernelSize - 1) * dilation + 1}`],
      ["a bias buffer iff hasBias", shape.hasBias === (buffers.bias !== undefined), `hasBias is ${shape.hasBias} but a bias buffer was${buffers.bias ? "" : " not"} given`],
      ["a residual buffer iff hasResidual", shape.hasResidual === (buffers.residual !== undefined), `hasResidual is ${shape.hasResidual} but a residual buffer was${buffers.residual ? "" : " not"} given`],
    ],
    buffers: {
      input: [buffers.input, batch * inChannels * inLength],
      "stream table": [buffers.streamTable, batch * 2],
      previous: [buffers.previous, slots * inChannels * tailLength],
      window: [tailFloats > 0 ? buffers.window : null, conv1dWindowFloats(shape)],
      weight: [buffers.weight, outChannels * (inChannels / groups) * kernelSize],
      bias: [buffers.bias, outChannels],
      residual: [buffers.residual, batch * outChannels * outLength],
      output: [buffers.output, batch * outChannels * outLength],
    },
  });
  const uniforms = conv1dUniforms(shape);
  // Unused optional inputs still need a binding (the flags are runtime values): read-only aliases of the weight.
  // Without a tail the window is the input itself.
  const window = tailFloats === 0 ? buffers.input : buffers.window;
  const main = kernelDispatch(
    device,
    { name: "conv1d", entryPoint: "main" },
    uniforms,
    [
      [3, window],
      [4, buffers.weight],
      [5, buffers.bias ?? buffers.weight],
      [6, buffers.residual ?? buffers.weight],
      [7, buffers.output],
    ],
    [Math.ceil((groups * Math.ceil(outChannels / groups / CHANNELS_PER_INVOCATION) * Math.ceil(outLength / FRAMES_PER_INVOCATION)) / 64), batch, 1],
  );
  if (tailFloats === 0) return [main];
  const tailBindings = [[2, buffers.previous], [3, window], [8, buffers.streamTable]] as const;
  return [
    kernelDispatch(device, { name: "conv1d", entryPoint: "assemble" }, uniforms, [[1, buffers.input], ...tailBindings], elementwiseGrid(device, conv1dWindowFloats(shape), 64)),
    main,
    kernelDispatch(device, { name: "conv1d", entryPoint: "save_tail" }, uniforms, tailBindings, linearWorkgroups(tailFloats)),
  ];
}
