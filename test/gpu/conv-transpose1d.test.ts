import { describe, expect, test } from "bun:test";
import { convTranspose1dDispatches, convTranspose1dOutputLength, convTranspose1dPartialLength, convTranspose1dUniforms, type ConvTranspose1dShape } from "../../src/gpu/conv-transpose1d.ts";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { createStreamTable, writeStreamTable } from "../../src/gpu/stream-table.ts";
import { referenceConvTranspose1d } from "./reference/conv-transpose1d.ts";
import { brokenRule, expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// float32 sums of up to 512·2 products (K = 2S overlaps two input frames) against a float64 reference.
const CONV_TRANSPOSE_TOLERANCE = { atol: 2e-5, rtol: 1e-5 };

interface Case {
  name: string;
  shape: Omit<ConvTranspose1dShape, "inLength" | "slots">;
  calls: number[];
}

const CASES: Case[] = [
  { name: "SEANet k12 s6 with bias, 3 streams", shape: { batch: 3, inChannels: 9, outChannels: 5, kernelSize: 12, stride: 6, groups: 1, hasBias: true }, calls: [1, 16, 2] },
  { name: "depthwise upsample k32 s16, no bias", shape: { batch: 2, inChannels: 67, outChannels: 67, kernelSize: 32, stride: 16, groups: 67, hasBias: false }, calls: [1, 5, 1] },
  { name: "k10 s5, long call", shape: { batch: 1, inChannels: 3, outChannels: 4, kernelSize: 10, stride: 5, groups: 1, hasBias: true }, calls: [96, 1] },
  { name: "grouped, K more than twice S", shape: { batch: 2, inChannels: 4, outChannels: 6, kernelSize: 7, stride: 2, groups: 2, hasBias: true }, calls: [1, 1, 3] },
  { name: "K = S (nothing carried)", shape: { batch: 1, inChannels: 2, outChannels: 3, kernelSize: 4, stride: 4, groups: 1, hasBias: true }, calls: [2, 1] },
  { name: "one channel", shape: { batch: 1, inChannels: 1, outChannels: 1, kernelSize: 8, stride: 4, groups: 1, hasBias: true }, calls: [1, 1] },
];

describe("conv-transpose1d kernel (streaming overlap-add)", () => {
  test("uniform struct matches the WGSL declaration", () => {
    expect(wgslStructByteSize("conv-transpose1d", "ConvTranspose1dParams")).toBe(convTranspose1dUniforms({ ...CASES[0]!.shape, slots: 3, inLength: 1 }).length * 4);
  });

  test("a call that breaks a rule is refused, naming the rule", async () => {
    const { device } = await gpuForTests();
    const shape: ConvTranspose1dShape = { batch: 1, slots: 1, inChannels: 4, outChannels: 6, inLength: 2, kernelSize: 4, stride: 2, groups: 2, hasBias: false };
    const large = storageBuffer(device, 4096);
    const buffers = { input: large, streamTable: large, partial: large, scratch: large, weight: large, output: large };
    expect(() => convTranspose1dDispatches(device, shape, buffers)).not.toThrow();
    expect(brokenRule(() => convTranspose1dDispatches(device, { ...shape, kernelSize: 1 }, buffers))).toBe("kernelSize ≥ stride");
    expect(brokenRule(() => convTranspose1dDispatches(device, { ...shape, groups: 4 }, buffers))).toBe("groups divide the channels");
    expect(brokenRule(() => convTranspose1dDispatches(device, shape, { ...buffers, bias: large }))).toBe("a bias buffer iff hasBias");
    expect(brokenRule(() => convTranspose1dDispatches(device, shape, { ...buffers, output: storageBuffer(device, 20 * 4) }))).toBe("output holds the shape");
  });

  for (const [caseIndex, { name, shape: base, calls }] of CASES.entries()) {
    test(`${name}: calls of [${calls.join(", ")}] match the CPU reference, partial included`, async () => {
      const { device } = await gpuForTests();
      const rand = seededRandom(2000 + caseIndex);
      const weight = randomArray(rand, base.inChannels * (base.outChannels / base.groups) * base.kernelSize, 0.5);
      const bias = base.hasBias ? randomArray(rand, base.outChannels, 0.1) : undefined;
      // One spare slot, and rows in reverse slot order: state must follow the stream table, not the row.
      const slots = base.batch + 1;
      const slotOf = (row: number) => slots - 1 - row;
      const rowFloats = base.outChannels * convTranspose1dPartialLength(base);
      const cpuSlots = new Float32Array(slots * rowFloats);
      const weightBuffer = storageBuffer(device, weight);
      const biasBuffer = bias ? storageBuffer(device, bias) : undefined;
      const partial = storageBuffer(device, cpuSlots.byteLength);
      const scratch = storageBuffer(device, base.batch * rowFloats * 4);
      const streamTable = createStreamTable(device, base.batch);
      writeStreamTable(device, streamTable, Array.from({ length: base.batch }, (_, row) => ({ slot: slotOf(row), offset: 0 })), slots);
      for (const [callIndex, inLength] of calls.entries()) {
        const shape = { ...base, slots, inLength };
        const cpuPartial = new Float32Array(base.batch * rowFloats);
        for (let row = 0; row < base.batch; row++) cpuPartial.set(cpuSlots.subarray(slotOf(row) * rowFloats, (slotOf(row) + 1) * rowFloats), row * rowFloats);
        const outFloats = base.batch * base.outChannels * convTranspose1dOutputLength(shape);
        const input = randomArray(rand, base.batch * base.inChannels * inLength);
        const output = storageBuffer(device, outFloats * 4);
        submitDispatches(device, convTranspose1dDispatches(device, shape, { input: storageBuffer(device, input), streamTable, partial, scratch, weight: weightBuffer, ...(biasBuffer ? { bias: biasBuffer } : {}), output }));
        const expected = referenceConvTranspose1d(shape, input, cpuPartial, weight, bias);
        expectClose(await readFloat32(device, output, outFloats), expected.output, { ...CONV_TRANSPOSE_TOLERANCE, label: `${name} call ${callIndex} output` });
        for (let row = 0; row < base.batch; row++) cpuSlots.set(expected.partial.subarray(row * rowFloats, (row + 1) * rowFloats), slotOf(row) * rowFloats);
        expectClose(await readFloat32(device, partial, cpuSlots.length), cpuSlots, { ...CONV_TRANSPOSE_TOLERANCE, label: `${name} call ${callIndex} partials by slot` });
      }
    });
  }

  test("streaming equals the offline transposed conv with the last K − S frames dropped (reference)", () => {
    const rand = seededRandom(11);
    const shape = { batch: 1, slots: 1, inChannels: 2, outChannels: 3, kernelSize: 6, stride: 3, groups: 1, hasBias: true };
    const weight = randomArray(rand, 2 * 3 * 6);
    const bias = randomArray(rand, 3);
    const input = randomArray(rand, 2 * 5);
    const whole = referenceConvTranspose1d({ ...shape, inLength: 5 }, input, new Float32Array(9), weight, bias).output;
    let partial: Float32Array = new Float32Array(9);
    const pieces: number[][] = [[], [], []];
    for (let t = 0; t < 5; t++) {
      const step = referenceConvTranspose1d({ ...shape, inLength: 1 }, Float32Array.of(input[t]!, input[5 + t]!), partial, weight, bias);
      partial = step.partial;
      for (let co = 0; co < 3; co++) pieces[co]!.push(...step.output.subarray(co * 3, co * 3 + 3));
    }
    for (let co = 0; co < 3; co++) expectClose(pieces[co]!, whole.subarray(co * 15, co * 15 + 15), { atol: 1e-6, rtol: 1e-6, label: `channel ${co}` });
  });
});
