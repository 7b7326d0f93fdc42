import { describe, expect, test } from "bun:test";
import { conv1dDispatches, conv1dOutputLength, conv1dTailLength, conv1dUniforms, conv1dWindowFloats, type Conv1dShape } from "../../src/gpu/conv1d.ts";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { createStreamTable, writeStreamTable } from "../../src/gpu/stream-table.ts";
import { referenceConv1d } from "./reference/conv1d.ts";
import { brokenRule, expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// float32 sums of up to 512·7 products of O(1) terms against a float64 reference.
const CONV_TOLERANCE = { atol: 2e-5, rtol: 1e-5 };

interface Case {
  name: string;
  shape: Omit<Conv1dShape, "inLength" | "slots">;
  /** Input frames of each successive call (the tail must carry state across them). */
  calls: number[];
}

const CASES: Case[] = [
  { name: "SEANet k7 first conv, 3 streams", shape: { batch: 3, inChannels: 5, outChannels: 7, kernelSize: 7, stride: 1, dilation: 1, groups: 1, hasBias: true, hasResidual: false, padMode: "constant" }, calls: [1, 16, 3] },
  { name: "1×1 projection, no bias, no tail", shape: { batch: 2, inChannels: 32, outChannels: 65, kernelSize: 1, stride: 1, dilation: 1, groups: 1, hasBias: false, hasResidual: false, padMode: "constant" }, calls: [1, 2] },
  { name: "ResBlock k1 with residual", shape: { batch: 2, inChannels: 3, outChannels: 6, kernelSize: 1, stride: 1, dilation: 1, groups: 1, hasBias: true, hasResidual: true, padMode: "constant" }, calls: [70, 5] },
  { name: "strided, dilated", shape: { batch: 1, inChannels: 4, outChannels: 3, kernelSize: 4, stride: 2, dilation: 3, groups: 1, hasBias: true, hasResidual: false, padMode: "constant" }, calls: [2, 130, 4] },
  { name: "grouped", shape: { batch: 2, inChannels: 6, outChannels: 9, kernelSize: 3, stride: 1, dilation: 1, groups: 3, hasBias: true, hasResidual: false, padMode: "constant" }, calls: [65, 1] },
  { name: "depthwise", shape: { batch: 4, inChannels: 8, outChannels: 8, kernelSize: 5, stride: 1, dilation: 2, groups: 8, hasBias: false, hasResidual: false, padMode: "constant" }, calls: [3, 1, 64] },
  { name: "downsample-like k32 s16 (calls shorter than the tail)", shape: { batch: 1, inChannels: 3, outChannels: 2, kernelSize: 32, stride: 16, dilation: 1, groups: 1, hasBias: false, hasResidual: false, padMode: "constant" }, calls: [16, 48, 16] },
  { name: "replicate padding (encoder downsample k32 s16)", shape: { batch: 2, inChannels: 3, outChannels: 2, kernelSize: 32, stride: 16, dilation: 1, groups: 1, hasBias: false, hasResidual: false, padMode: "replicate" }, calls: [16, 32, 16] },
  { name: "replicate padding, k7", shape: { batch: 3, inChannels: 2, outChannels: 3, kernelSize: 7, stride: 1, dilation: 1, groups: 1, hasBias: true, hasResidual: false, padMode: "replicate" }, calls: [2, 5] },
  { name: "one stream, one channel, one frame", shape: { batch: 1, inChannels: 1, outChannels: 1, kernelSize: 3, stride: 1, dilation: 1, groups: 1, hasBias: true, hasResidual: false, padMode: "constant" }, calls: [1, 1, 1] },
];

describe("conv1d kernel (causal streaming)", () => {
  test("uniform struct matches the WGSL declaration", () => {
    const shape: Conv1dShape = { ...CASES[0]!.shape, slots: 3, inLength: 1 };
    expect(wgslStructByteSize("conv1d", "Conv1dParams")).toBe(conv1dUniforms(shape).length * 4);
    expect(conv1dTailLength(shape)).toBe(6);
  });

  for (const [caseIndex, { name, shape: base, calls }] of CASES.entries()) {
    test(`${name}: calls of [${calls.join(", ")}] match the CPU reference, tail included`, async () => {
      const { device } = await gpuForTests();
      const rand = seededRandom(1000 + caseIndex);
      const weight = randomArray(rand, base.outChannels * (base.inChannels / base.groups) * base.kernelSize, 1 / Math.sqrt((base.inChannels / base.groups) * base.kernelSize));
      const bias = base.hasBias ? randomArray(rand, base.outChannels, 0.1) : undefined;
      const tailLength = conv1dTailLength(base);
      // One spare slot, and rows in reverse slot order: state must follow the stream table, not the row.
      const slots = base.batch + 1;
      const slotOf = (row: number) => slots - 1 - row;
      const rowFloats = base.inChannels * tailLength;
      const cpuSlots = new Float32Array(slots * rowFloats);
      const weightBuffer = storageBuffer(device, weight);
      const biasBuffer = bias ? storageBuffer(device, bias) : undefined;
      const previous = storageBuffer(device, cpuSlots.byteLength);
      const window = storageBuffer(device, conv1dWindowFloats({ ...base, inLength: Math.max(...calls) }) * 4);
      const streamTable = createStreamTable(device, base.batch);
      let framesSoFar = 0;
      for (const [callIndex, inLength] of calls.entries()) {
        // The offset tells a stream's first call (offset 0) from later ones, for replicate padding.
        writeStreamTable(device, streamTable, Array.from({ length: base.batch }, (_, row) => ({ slot: slotOf(row), offset: framesSoFar })), slots);
        const shape = { ...base, slots, inLength };
        const cpuPrevious = new Float32Array(base.batch * rowFloats);
        for (let row = 0; row < base.batch; row++) cpuPrevious.set(cpuSlots.subarray(slotOf(row) * rowFloats, (slotOf(row) + 1) * rowFloats), row * rowFloats);
        const outFloats = base.batch * base.outChannels * conv1dOutputLength(shape);
        const input = randomArray(rand, base.batch * base.inChannels * inLength);
        const residual = base.hasResidual ? randomArray(rand, outFloats) : undefined;
        const output = storageBuffer(device, outFloats * 4);
        submitDispatches(
          device,
          conv1dDispatches(device, shape, {
            input: storageBuffer(device, input),
            streamTable,
            previous,
            window,
            weight: weightBuffer,
            ...(biasBuffer ? { bias: biasBuffer } : {}),
            ...(residual ? { residual: storageBuffer(device, residual) } : {}),
            output,
          }),
        );
        const expected = referenceConv1d(shape, input, cpuPrevious, weight, bias, residual, Array<boolean>(base.batch).fill(callIndex === 0));
        framesSoFar += inLength;
        expectClose(await readFloat32(device, output, outFloats), expected.output, { ...CONV_TOLERANCE, label: `${name} call ${callIndex} output` });
        for (let row = 0; row < base.batch; row++) cpuSlots.set(expected.previous.subarray(row * rowFloats, (row + 1) * rowFloats), slotOf(row) * rowFloats);
        expectClose(await readFloat32(device, previous, cpuSlots.length), cpuSlots, { atol: 0, rtol: 0, label: `${name} call ${callIndex} tails by slot` });
      }
    });
  }

  test("a call that breaks a rule is refused, naming the rule", async () => {
    const { device } = await gpuForTests();
    const shape: Conv1dShape = { batch: 1, slots: 1, inChannels: 2, outChannels: 2, inLength: 4, kernelSize: 4, stride: 2, dilation: 1, groups: 1, hasBias: true, hasResidual: false, padMode: "constant" };
    const large = storageBuffer(device, 4096);
    const buffers = { input: large, streamTable: large, previous: large, window: large, weight: large, bias: large, output: large };
    expect(() => conv1dDispatches(device, shape, buffers)).not.toThrow();
    expect(brokenRule(() => conv1dDispatches(device, { ...shape, inLength: 5 }, buffers))).toBe("stride divides inLength");
    expect(brokenRule(() => conv1dDispatches(device, { ...shape, batch: 2 }, buffers))).toBe("slots ≥ batch");
    expect(brokenRule(() => conv1dDispatches(device, { ...shape, groups: 0 }, buffers))).toBe("groups is a positive integer");
    expect(brokenRule(() => conv1dDispatches(device, shape, { ...buffers, bias: undefined }))).toBe("a bias buffer iff hasBias");
    expect(brokenRule(() => conv1dDispatches(device, shape, { ...buffers, weight: storageBuffer(device, 12 * 4) }))).toBe("weight holds the shape");
  });

  test("streaming in pieces equals one call over the whole input (reference)", () => {
    const rand = seededRandom(7);
    const base = { batch: 2, slots: 2, inChannels: 3, outChannels: 4, kernelSize: 7, stride: 1, dilation: 1, groups: 1, hasBias: true, hasResidual: false, padMode: "constant" as const };
    const total = 20;
    const weight = randomArray(rand, 4 * 3 * 7);
    const bias = randomArray(rand, 4);
    const input = randomArray(rand, 2 * 3 * total);
    const zeros = new Float32Array(2 * 3 * 6);
    const whole = referenceConv1d({ ...base, inLength: total }, input, zeros, weight, bias).output;
    const slice = (from: number, to: number) => {
      const part = new Float32Array(2 * 3 * (to - from));
      for (let row = 0; row < 6; row++) part.set(input.subarray(row * total + from, row * total + to), row * (to - from));
      return part;
    };
    const first = referenceConv1d({ ...base, inLength: 8 }, slice(0, 8), zeros, weight, bias);
    const second = referenceConv1d({ ...base, inLength: 12 }, slice(8, 20), first.previous, weight, bias);
    for (let row = 0; row < 8; row++) {
      expect(Array.from(first.output.subarray(row * 8, row * 8 + 8))).toEqual(Array.from(whole.subarray(row * total, row * total + 8)));
      expect(Array.from(second.output.subarray(row * 12, row * 12 + 12))).toEqual(Array.from(whole.subarray(row * total + 8, row * total + 20)));
    }
  });
});
