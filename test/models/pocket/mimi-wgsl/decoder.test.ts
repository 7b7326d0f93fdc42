import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { MimiGpuDecoder, type MimiGpuState } from "../../../../src/models/pocket/mimi-wgsl/decoder.ts";
import { readMimiWeightsFromOnnx, readMimiWeightsFromSafetensors, type MimiDecoderWeights } from "../../../../src/models/pocket/mimi-wgsl/weights.ts";
import { gpuForTests, randomArray, seededRandom } from "../../../gpu/support.ts";

const TINY = join(import.meta.dir, "../../../../../shared/fixtures/pocket-tiny");
// pocket-tiny's Mimi transformer: 2 heads of 16 (golden.json model_config).
const TINY_HEADS = 2;

let weights: MimiDecoderWeights;
let decoder: MimiGpuDecoder;

beforeAll(async () => {
  const { device } = await gpuForTests();
  weights = await readMimiWeightsFromOnnx(join(TINY, "mimi_decoder.onnx"));
  decoder = new MimiGpuDecoder(device, weights, { heads: TINY_HEADS, maxStreams: 4 });
});

function latentsOf(seed: number, frames: number): Float32Array {
  return randomArray(seededRandom(seed), frames * 32, 2);
}

/** One stream alone from a fresh state, in calls of the given frame counts; the audio concatenated. */
async function alone(latents: Float32Array, calls: number[]): Promise<Float32Array<ArrayBuffer>> {
  let state = decoder.emptyState();
  const audio = new Float32Array((latents.length / 32) * 1920);
  let frame = 0;
  for (const count of calls) {
    const result = await decoder.decode(state, latents.subarray(frame * 32, (frame + count) * 32));
    state = result.state;
    audio.set(result.audio, frame * 1920);
    frame += count;
  }
  decoder.release(state);
  return audio;
}

describe("MimiGpuDecoder", () => {
  test("reads its architecture off the weights", () => {
    expect(decoder.config).toEqual({ latentDim: 32, samplesPerFrame: 1920 });
    expect(decoder.model).toMatchObject({ width: 32, heads: 2, headDim: 16, layers: 2, feedForward: 128, context: 250, upsampleStride: 16 });
  });

  test("fp32 ONNX and upstream safetensors give the same weights", async () => {
    const fromSafetensors = await readMimiWeightsFromSafetensors(join(TINY, "model.safetensors"));
    expect([...fromSafetensors.keys()].sort()).toEqual([...weights.keys()].sort());
    for (const [name, tensor] of fromSafetensors) {
      expect({ name, dims: weights.get(name)!.dims }).toEqual({ name, dims: tensor.dims });
      expect(weights.get(name)!.values).toEqual(tensor.values);
    }
  });

  test("a call of k frames gives what k one-frame calls give, to float rounding (≤ 1e-5 of the peak): frame counts may be grouped across streams", async () => {
    for (const frames of [2, 4, 8]) {
      const latents = latentsOf(30 + frames, frames);
      const oneCall = await alone(latents, [frames]);
      const frameByFrame = await alone(latents, Array<number>(frames).fill(1));
      // The same math in another order of float sums: equal to float rounding, relative to the signal's peak.
      let worst = 0;
      let peak = 0;
      for (let index = 0; index < oneCall.length; index++) {
        worst = Math.max(worst, Math.abs(oneCall[index]! - frameByFrame[index]!));
        peak = Math.max(peak, Math.abs(frameByFrame[index]!));
      }
      expect({ frames, relative: worst / peak <= 1e-5 }).toEqual({ frames, relative: true });
    }
  });

  test("two streams decoded in one batch give exactly what each gives alone", async () => {
    const first = latentsOf(1, 3);
    const second = latentsOf(2, 3);
    const expectedFirst = await alone(first, [1, 2]);
    const expectedSecond = await alone(second, [1, 2]);
    let states: MimiGpuState[] = [decoder.emptyState(), decoder.emptyState()];
    const audio = [new Float32Array(3 * 1920), new Float32Array(3 * 1920)];
    for (const [from, to] of [[0, 1], [1, 3]] as const) {
      const results = await decoder.decodeBatch([
        { state: states[0]!, latents: first.subarray(from * 32, to * 32) },
        { state: states[1]!, latents: second.subarray(from * 32, to * 32) },
      ]);
      results.forEach((result, index) => audio[index]!.set(result.audio, from * 1920));
      states = results.map((result) => result.state);
    }
    states.forEach((state) => decoder.release(state));
    expect(audio[0]).toEqual(expectedFirst);
    expect(audio[1]).toEqual(expectedSecond);
  });

  test("a stream's state survives interleaving with other streams, alone and in batches in either order", async () => {
    const a = latentsOf(3, 4);
    const b = latentsOf(4, 3);
    const c = latentsOf(5, 2);
    const expectedA = await alone(a, [1, 1, 1, 1]);
    const expectedB = await alone(b, [1, 1, 1]);
    const expectedC = await alone(c, [2]);
    const got = { a: new Float32Array(4 * 1920), b: new Float32Array(3 * 1920), c: new Float32Array(2 * 1920) };
    let stateA = decoder.emptyState();
    let stateB = decoder.emptyState();
    const frame = (latents: Float32Array, index: number, count = 1) => latents.subarray(index * 32, (index + count) * 32);

    let result = await decoder.decode(stateA, frame(a, 0));
    stateA = result.state;
    got.a.set(result.audio, 0);
    let batch = await decoder.decodeBatch([{ state: stateB, latents: frame(b, 0) }, { state: stateA, latents: frame(a, 1) }]);
    [stateB, stateA] = [batch[0]!.state, batch[1]!.state];
    got.b.set(batch[0]!.audio, 0);
    got.a.set(batch[1]!.audio, 1920);
    // A third stream comes and goes in between, taking a slot of its own.
    let stateC = decoder.emptyState();
    result = await decoder.decode(stateC, frame(c, 0, 2));
    stateC = result.state;
    got.c.set(result.audio, 0);
    decoder.release(stateC);
    result = await decoder.decode(stateB, frame(b, 1));
    stateB = result.state;
    got.b.set(result.audio, 1920);
    batch = await decoder.decodeBatch([{ state: stateA, latents: frame(a, 2) }, { state: stateB, latents: frame(b, 2) }]);
    [stateA, stateB] = [batch[0]!.state, batch[1]!.state];
    got.a.set(batch[0]!.audio, 2 * 1920);
    got.b.set(batch[1]!.audio, 2 * 1920);
    result = await decoder.decode(stateA, frame(a, 3));
    got.a.set(result.audio, 3 * 1920);
    decoder.release(result.state);
    decoder.release(stateB);

    expect(got.a).toEqual(expectedA);
    expect(got.b).toEqual(expectedB);
    expect(got.c).toEqual(expectedC);
  });

  test("a used state cannot be replayed, and a batch needs the same frame count per stream", async () => {
    const state = decoder.emptyState();
    const { state: next } = await decoder.decode(state, latentsOf(6, 1));
    await expect(decoder.decode(state, latentsOf(6, 1))).rejects.toThrow(/already used/);
    const other = decoder.emptyState();
    await expect(decoder.decodeBatch([{ state: next, latents: latentsOf(7, 1) }, { state: other, latents: latentsOf(8, 2) }])).rejects.toThrow(/same number/);
    decoder.release(next);
    decoder.release(other);
  });

  test("slots run out with a clear error and come back on release", () => {
    const states = Array.from({ length: 4 }, () => decoder.emptyState());
    expect(() => decoder.emptyState()).toThrow(/state slots are in use/);
    decoder.release(states[0]!);
    states[0] = decoder.emptyState();
    states.forEach((state) => decoder.release(state));
  });
});

describe("MimiGpuDecoder with tight storage limits", () => {
  test("a batch beyond one storage binding is split along time, exactly as calls of that size would be", async () => {
    const { device } = await gpuForTests();
    const whole = new MimiGpuDecoder(device, weights, { heads: TINY_HEADS, maxStreams: 2 });
    const tight = new MimiGpuDecoder(device, weights, { heads: TINY_HEADS, maxStreams: 2 });
    // Pretend the binding limit fits 3 stream-frames, so 2 streams × 4 frames take 4 submissions of 1 frame.
    Object.defineProperty(tight, "maxFramesPerSubmission", { value: () => 3 });
    const requests = (decoder: MimiGpuDecoder) => [
      { state: decoder.emptyState(), latents: latentsOf(21, 4) },
      { state: decoder.emptyState(), latents: latentsOf(22, 4) },
    ];
    // The reference: the same batch fed one frame per call by the caller.
    let pending = requests(whole);
    const expected = pending.map(() => new Float32Array(4 * 1920));
    for (let frame = 0; frame < 4; frame++) {
      const results = await whole.decodeBatch(pending.map(({ state, latents }) => ({ state, latents: latents.subarray(frame * 32, (frame + 1) * 32) })));
      results.forEach((result, index) => expected[index]!.set(result.audio, frame * 1920));
      pending = pending.map(({ latents }, index) => ({ state: results[index]!.state, latents }));
    }
    const split = await tight.decodeBatch(requests(tight));
    expect(split.map((result) => result.state.frames)).toEqual([4, 4]);
    split.forEach((result, index) => expect(result.audio).toEqual(expected[index]!));
    expect(whole.maxFramesPerSubmission()).toBeGreaterThan(100);
    whole.destroy();
    tight.destroy();
  });
});
