/** The loop rule (§2.2) and the seed default, as PocketRequest applies them for the runner. */
import { describe, expect, test } from "bun:test";
import { PocketRequest, type Generation, type StepTrace } from "../../../src/models/pocket/request-state.ts";
import { seededLatentNoise } from "../../../src/models/pocket/noise.ts";
import type { FlowLmState } from "../../../src/models/pocket/stages/state.ts";

const CACHE_POSITIONS = 1000;
/** A voice of 30 positions; the request only hands it on, so its tensors do not matter here. */
const VOICE: FlowLmState = { tensors: [], positions: 30 };
/** 300 tokens: a frame cap (1275) past anything the tests run into. */
const LONG_CHUNK = { tokenIds: Array<number>(300).fill(1), framesAfterEos: 3 };

/**
 * Samples one chunk whose step k gives latent [k] and the k-th of `eosLogits` (−10 past its end), as the
 * runner applies each step: the inputs fed, the latents emitted, every step's trace.
 */
function runChunk(eosLogits: readonly number[], options: { framesAfterEos: number; maxFrames?: number; generation?: Partial<Generation> }) {
  const traces: StepTrace[] = [];
  const chunk = { ...LONG_CHUNK, framesAfterEos: options.framesAfterEos };
  const request = new PocketRequest({ voice: VOICE, chunks: [chunk], params: { eosThreshold: -4, maxFramesPerChunk: options.maxFrames }, seed: 1, onStep: (trace) => traces.push(trace), ...options.generation });
  request.startChunk({ state: VOICE }, VOICE.positions, chunk, CACHE_POSITIONS, "decoder state");
  const inputs: (number | null)[] = [];
  for (let k = 0; request.sampling; k++) {
    inputs.push(request.sampling.input?.[0] ?? null);
    request.applyStep(Float32Array.of(k), eosLogits[k] ?? -10);
  }
  return { request, traces, inputs, emitted: request.decoding[0]!.pending.map((latent) => latent[0]) };
}

describe("the loop rule (§2.2)", () => {
  test("emits frames_after_eos latents from the EOS step on, running but not emitting the step that stops it", () => {
    const { emitted, traces, request } = runChunk([-9, -9, -9, -9, -3.9], { framesAfterEos: 3 });
    expect(emitted).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(traces).toHaveLength(8);
    expect(traces.at(-1)).toMatchObject({ chunkIndex: 0, step: 7, emitted: false });
    expect(traces.filter((trace) => trace.isEos).map((trace) => trace.step)).toEqual([4]);
    expect(request.samplingDone).toBe(true);
    expect(request.truncated).toBe(false);
  });

  test("frames_after_eos 0 stops at the EOS step itself", () => {
    const { emitted, traces } = runChunk([-9, -9, -1], { framesAfterEos: 0 });
    expect(emitted).toEqual([0, 1]);
    expect(traces).toHaveLength(3);
  });

  test("an EOS at step 0 counts (sherpa's `eos_step > 0` bug is not copied, §3.4)", () => {
    expect(runChunk([0], { framesAfterEos: 2 }).emitted).toEqual([0, 1]);
  });

  test("the first EOS fixes the stop; later logits below the threshold do not reset it", () => {
    expect(runChunk([-9, 0, -9, -9, -9, 0], { framesAfterEos: 3 }).emitted).toEqual([0, 1, 2, 3]);
  });

  test("the threshold is strict: a logit equal to it is not EOS", () => {
    expect(runChunk([-4, -4, -4], { framesAfterEos: 1, maxFrames: 5 }).emitted).toEqual([0, 1, 2, 3, 4]);
  });

  test("without EOS it runs exactly the frame cap, all emitted, and the answer is truncated", () => {
    const { emitted, traces, request } = runChunk([], { framesAfterEos: 3, maxFrames: 7 });
    expect(emitted).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(traces.every((trace) => trace.emitted)).toBe(true);
    expect(request.truncated).toBe(true);
  });

  test("feeds BOS (null) first, then each emitted latent", () => {
    expect(runChunk([], { framesAfterEos: 3, maxFrames: 3 }).inputs).toEqual([null, 0, 1]);
  });

  test("the frame cap is the upstream one, lowered to what is left of the cache", () => {
    const request = new PocketRequest({ voice: VOICE, chunks: [], seed: 1 });
    // 6 tokens: ceil((6/3 + 2)·12.5) = 50 frames.
    request.startChunk({ state: VOICE }, 30, { tokenIds: [1, 2, 3, 4, 5, 6], framesAfterEos: 2 }, CACHE_POSITIONS, null);
    expect(request.sampling?.maxFrames).toBe(50);
    const nearlyFull = new PocketRequest({ voice: VOICE, chunks: [], seed: 1 });
    nearlyFull.startChunk({ state: VOICE }, 997, { tokenIds: [1, 2, 3, 4, 5, 6], framesAfterEos: 2 }, CACHE_POSITIONS, null);
    expect(nearlyFull.sampling?.maxFrames).toBe(3);
    // Nothing left: the chunk ends as it starts.
    const full = new PocketRequest({ voice: VOICE, chunks: [], seed: 1 });
    full.startChunk({ state: VOICE }, 1000, { tokenIds: [1, 2, 3, 4, 5, 6], framesAfterEos: 2 }, CACHE_POSITIONS, null);
    expect(full.sampling).toBeUndefined();
    expect(full.samplingDone).toBe(true);
  });

  test("maxTotalFrames ends the whole request, truncated, at that many emitted frames", () => {
    const { emitted, request } = runChunk([], { framesAfterEos: 3, generation: { maxTotalFrames: 4 } });
    expect(emitted).toEqual([0, 1, 2, 3]);
    expect(request.samplingDone).toBe(true);
    expect(request.truncated).toBe(true);
  });

  test("frames_after_eos must be a non-negative integer", () => {
    for (const framesAfterEos of [-1, 1.5]) expect(() => runChunk([], { framesAfterEos })).toThrow(RangeError);
  });
});

describe("noise of a request", () => {
  test("a seed gives its seeded noise at the request's temperature, as a number or a bigint", () => {
    const expected = seededLatentNoise(42, 0.3).next(8);
    expect(new PocketRequest({ voice: VOICE, chunks: [], seed: 42, params: { temperature: 0.3 } }).noise.next(8)).toEqual(expected);
    expect(new PocketRequest({ voice: VOICE, chunks: [], seed: 42n, params: { temperature: 0.3 } }).noise.next(8)).toEqual(expected);
  });

  test("without a seed or noise each request draws a seed of its own", () => {
    const first = () => Array.from(new PocketRequest({ voice: VOICE, chunks: [] }).noise.next(8));
    expect(first()).not.toEqual(first());
  });
});
