import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { decodeSafetensorsWithInt64 } from "../../../../src/formats/safetensors.ts";
import { storageBuffer } from "../../../../src/gpu/kernel.ts";
import { MIMI_DECODER_TRANSFORMER, MimiTransformer, transposeMatrix, uploadMimiTransformerWeights, type MimiTransformerConfig } from "../../../../src/models/pocket/mimi-wgsl/transformer.ts";
import { freshMimiTransformerReferenceState, mimiTransformerReference, type MimiTransformerReferenceState } from "../../../gpu/reference/mimi-transformer.ts";
import { createStreamTable, writeStreamTable } from "../../../../src/gpu/stream-table.ts";
import { expectClose, gpuForTests, randomArray, readFloat32, seededRandom } from "../../../gpu/support.ts";

const FIXTURES_DIR = join(import.meta.dir, "../../../../../shared/fixtures");

// Two layers of f32 matmuls (inner sizes up to 2048), online softmax and the erfc fit, against float64
// references (random weights) or upstream's float32 PyTorch (golden).
const STACK_TOLERANCE = { atol: 2e-5, rtol: 1e-4 };

/** Runs calls of `steps` for the given streams (slot, offset) on the GPU; returns [N, C, T]. */
async function runGpu(
  device: GPUDevice,
  transformer: MimiTransformer,
  table: GPUBuffer,
  input: Float32Array,
  streams: Array<{ slot: number; offset: number }>,
  steps: number,
): Promise<Float32Array> {
  writeStreamTable(device, table, streams, transformer.slots);
  const inputBuffer = storageBuffer(device, input);
  const output = storageBuffer(device, input.byteLength);
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  transformer.encode(pass, streams.length, steps, { streamTable: table, input: inputBuffer, output });
  pass.end();
  device.queue.submit([encoder.finish()]);
  return readFloat32(device, output, input.length);
}

function loadFixture(name: string): { weights: Record<string, Float32Array>; golden: Record<string, Float32Array> } {
  const dir = join(FIXTURES_DIR, name);
  if (!existsSync(join(dir, "model.safetensors"))) throw new Error(`fixture ${dir} not found: these tests need the shared/ folder beside the repository`);
  const read = (file: string) => {
    const floats: Record<string, Float32Array> = {};
    for (const [key, tensor] of Object.entries(decodeSafetensorsWithInt64(new Uint8Array(readFileSync(join(dir, file)))))) if (tensor.dtype === "F32") floats[key] = tensor.data;
    return floats;
  };
  return { weights: read("model.safetensors"), golden: read("golden.safetensors") };
}

function fixtureConfig(name: string): MimiTransformerConfig {
  const config = JSON.parse(readFileSync(join(FIXTURES_DIR, name, "golden.json"), "utf8")) as { model_config: { mimi?: { transformer: Record<string, number> }; transformer?: Record<string, number> } };
  const transformer = (config.model_config.mimi?.transformer ?? config.model_config.transformer)!;
  return {
    dModel: transformer.d_model!,
    heads: transformer.num_heads!,
    layers: transformer.num_layers!,
    dimFeedforward: transformer.dim_feedforward!,
    context: transformer.context!,
    maxPeriod: 10_000,
    eps: 1e-5,
  };
}

describe("Mimi decoder transformer stack", () => {
  test("the real decoder's configuration is the spec's", () => {
    expect(fixtureConfig("mimi-full")).toEqual(MIMI_DECODER_TRANSFORMER);
  });

  // Golden: upstream's decoder_transformer output for the upsampled first two latents, decoded one latent
  // (16 steps) per call from a fresh state.
  for (const fixture of ["mimi-full", "pocket-tiny"]) {
    test(`${fixture}: reproduces upstream's decoder_transformer intermediate, per latent and in one call`, async () => {
      const { device } = await gpuForTests();
      const config = fixtureConfig(fixture);
      const { weights, golden } = loadFixture(fixture);
      const prefix = "mimi.decoder_transformer.transformer.";
      const tensor = (name: string) => weights[prefix + name] ?? (() => { throw new Error(`${fixture} lacks ${prefix}${name}`); })();
      const transformer = new MimiTransformer(device, config, uploadMimiTransformerWeights(device, config, tensor, "out-in"), 1);
      const table = createStreamTable(device, 1);
      const upsampled = golden["mimi.intermediate.upsample"]!; // [1, C, 32]
      const expected = golden["mimi.intermediate.decoder_transformer"]!;
      const C = config.dModel;
      const frame = (values: Float32Array, t0: number) => {
        const out = new Float32Array(C * 16);
        for (let c = 0; c < C; c++) out.set(values.subarray(c * 32 + t0, c * 32 + t0 + 16), c * 16);
        return out;
      };
      const perLatent = [await runGpu(device, transformer, table, frame(upsampled, 0), [{ slot: 0, offset: 0 }], 16), await runGpu(device, transformer, table, frame(upsampled, 16), [{ slot: 0, offset: 16 }], 16)];
      for (const [index, output] of perLatent.entries()) expectClose(output, frame(expected, 16 * index), { ...STACK_TOLERANCE, label: `${fixture} latent ${index}` });
      expectClose(await runGpu(device, transformer, table, upsampled, [{ slot: 0, offset: 0 }], 32), expected, { ...STACK_TOLERANCE, label: `${fixture} one call of 32 steps` });

      // The CPU reference, with Linear weights in [in, out], reproduces the same golden values.
      const linearInOut = (name: string) => {
        const values = tensor(name);
        const sizes: Record<string, [number, number]> = { in_proj: [3 * C, C], out_proj: [C, C], linear1: [config.dimFeedforward, C], linear2: [C, config.dimFeedforward] };
        const key = Object.keys(sizes).find((part) => name.includes(part));
        return key ? transposeMatrix(values, sizes[key]![0], sizes[key]![1]) : values;
      };
      expectClose(mimiTransformerReference(config, linearInOut, upsampled, [freshMimiTransformerReferenceState(config)], 32), expected, { ...STACK_TOLERANCE, label: `${fixture} CPU reference` });
    });
  }

  // Seeded random weights: two streams at different offsets sharing batches with a third, slots
  // permuted, rings wrapped many times (context 24 with 16-step calls) and once at the real 250.
  for (const context of [24, 250]) {
    test(`random weights, context ${context}: streams interleaved at different offsets match the CPU reference call after call`, async () => {
      const { device } = await gpuForTests();
      const config: MimiTransformerConfig = { dModel: 64, heads: 4, layers: 2, dimFeedforward: 96, context, maxPeriod: 10_000, eps: 1e-5 };
      const rand = seededRandom(context);
      const values = new Map<string, Float32Array>();
      const tensor = (name: string) => {
        let value = values.get(name);
        if (!value) {
          const { dModel, dimFeedforward } = config;
          const sizes: Record<string, [number, number]> = { in_proj: [dModel, 3 * dModel], out_proj: [dModel, dModel], linear1: [dModel, dimFeedforward], linear2: [dimFeedforward, dModel] };
          const linear = Object.entries(sizes).find(([part]) => name.includes(part))?.[1];
          if (linear) value = randomArray(rand, linear[0] * linear[1], 1.7 / Math.sqrt(linear[0]));
          else if (name.includes("layer_scale")) value = randomArray(rand, dModel, 0.15).map((x) => x + 0.25);
          else if (name.endsWith("weight")) value = randomArray(rand, dModel, 0.2).map((x) => x + 1);
          else value = randomArray(rand, dModel, 0.1);
          values.set(name, value);
        }
        return value;
      };
      const transformer = new MimiTransformer(device, config, uploadMimiTransformerWeights(device, config, tensor, "in-out"), 3);
      const table = createStreamTable(device, 3);
      const states: MimiTransformerReferenceState[] = [0, 1, 2].map(() => freshMimiTransformerReferenceState(config));
      const offsets = [0, 0, 0];
      const slots = [2, 0, 1];
      // Which streams each call carries, and its steps: stream 1 runs ahead alone past the window, then
      // all three share batches, then 0 and 2 continue without 1.
      const calls: Array<{ streams: number[]; steps: number }> = [
        { streams: [1], steps: 150 },
        { streams: [1], steps: 130 },
        { streams: [0, 1, 2], steps: 16 },
        { streams: [2, 0], steps: 16 },
        { streams: [1, 2], steps: 1 },
        { streams: [0, 1, 2], steps: 16 },
      ];
      for (const [callIndex, { streams, steps }] of calls.entries()) {
        const input = randomArray(rand, streams.length * config.dModel * steps, 2);
        const gpu = await runGpu(device, transformer, table, input, streams.map((stream) => ({ slot: slots[stream]!, offset: offsets[stream]! })), steps);
        const expected = mimiTransformerReference(config, tensor, input, streams.map((stream) => states[stream]!), steps);
        expectClose(gpu, expected, { ...STACK_TOLERANCE, label: `call ${callIndex} (streams ${streams.join(", ")} at ${streams.map((stream) => offsets[stream]).join(", ")})` });
        for (const stream of streams) offsets[stream]! += steps;
      }
    });
  }
});
