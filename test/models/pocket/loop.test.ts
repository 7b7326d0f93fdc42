import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadPocketBundle } from "../../../src/models/pocket/bundle/load.ts";
import type { PocketBundle } from "../../../src/models/pocket/bundle/pocket-bundle.ts";
import { chunkTokenBudget, chunkLatents, generateSpeech, maxFramesForTokens, planTextChunks, type ArStepFunction, type GeneratedFrame, type GenerationRequest, type StepTrace } from "../../../src/models/pocket/loop.ts";
import { decodeAlongside } from "../../../src/models/pocket/decode-schedule.ts";
import { replayLatentNoise, seededLatentNoise, type LatentNoise } from "../../../src/models/pocket/noise.ts";
import { closePocketSessions, openPocketSessions, type PocketSessions } from "../../../src/models/pocket/sessions.ts";
import { createPocketStages, type PocketStages } from "../../../src/models/pocket/pipeline.ts";
import { voiceStateFromSafetensors } from "../../../src/models/pocket/stages/flow-lm.ts";
import { type FlowLmState } from "../../../src/models/pocket/stages/state.ts";
import { SentencePieceTokenizer } from "../../../src/text/sentencepiece.ts";
import { prepareTextPrompt } from "../../../src/models/pocket/text-prompt.ts";
import { compareTensors, RELATIVE_RMS_TOLERANCE } from "../../../src/conformance/harness.ts";

const TINY_DIR = join(import.meta.dir, "../../../../shared/fixtures/pocket-tiny");
const GOLDEN = JSON.parse(readFileSync(join(TINY_DIR, "golden.json"), "utf8"));
const LATENT_DIM = 32;
/** Single sentences longer than the 1000-position FlowLM cache, in tokens, and the longest single word allowed. */
const OVERLONG_INPUTS = { "9×1000": "9".repeat(1000), '"a "×2000': "a ".repeat(2000), "🙂×600": "🙂".repeat(600), "one 4096-char word": "x".repeat(4096) };

/** A step function that returns latent [k, k, …] and the k-th logit of `eosLogits` (or −10 past its end). */
function fakeStep(eosLogits: readonly number[], inputs: (Float32Array | null)[] = []): ArStepFunction {
  let k = 0;
  return async (input) => {
    inputs.push(input);
    const step = k++;
    return { latent: new Float32Array(LATENT_DIM).fill(step), eosLogit: eosLogits[step] ?? -10 };
  };
}

async function runLoop(eosLogits: readonly number[], options: { framesAfterEos: number; maxFrames: number; signal?: AbortSignal }) {
  const traces: StepTrace[] = [];
  const inputs: (Float32Array | null)[] = [];
  const emitted: number[] = [];
  for await (const latent of chunkLatents(fakeStep(eosLogits, inputs), { ...options, eosThreshold: -4, onStep: (trace) => traces.push(trace) })) emitted.push(latent[0]!);
  return { emitted, traces, inputs };
}

describe("the per-chunk loop (§2.2)", () => {
  test("emits frames_after_eos latents from the EOS step on, running but not emitting the step that stops it", async () => {
    const { emitted, traces } = await runLoop([-9, -9, -9, -9, -3.9], { framesAfterEos: 3, maxFrames: 100 });
    expect(emitted).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(traces).toHaveLength(8);
    expect(traces.at(-1)).toMatchObject({ step: 7, emitted: false });
    expect(traces.filter((trace) => trace.isEos).map((trace) => trace.step)).toEqual([4]);
  });

  test("frames_after_eos 0 stops at the EOS step itself", async () => {
    const { emitted, traces } = await runLoop([-9, -9, -1], { framesAfterEos: 0, maxFrames: 100 });
    expect(emitted).toEqual([0, 1]);
    expect(traces).toHaveLength(3);
  });

  test("an EOS at step 0 counts (sherpa's `eos_step > 0` bug is not copied, §3.4)", async () => {
    expect((await runLoop([0], { framesAfterEos: 2, maxFrames: 100 })).emitted).toEqual([0, 1]);
  });

  test("the first EOS fixes the stop; later logits below the threshold do not reset it", async () => {
    const { emitted } = await runLoop([-9, 0, -9, -9, -9, 0], { framesAfterEos: 3, maxFrames: 100 });
    expect(emitted).toEqual([0, 1, 2, 3]);
  });

  test("the threshold is strict: a logit equal to it is not EOS", async () => {
    expect((await runLoop([-4, -4, -4], { framesAfterEos: 1, maxFrames: 5 })).emitted).toEqual([0, 1, 2, 3, 4]);
  });

  test("without EOS it runs exactly max frames, all emitted", async () => {
    const { emitted, traces } = await runLoop([], { framesAfterEos: 3, maxFrames: 7 });
    expect(emitted).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(traces.every((trace) => trace.emitted)).toBe(true);
  });

  test("feeds BOS (null) first, then each emitted latent", async () => {
    const { inputs } = await runLoop([], { framesAfterEos: 3, maxFrames: 3 });
    expect(inputs.map((input) => (input === null ? null : input[0]))).toEqual([null, 0, 1]);
  });

  test("stops before the next step once aborted", async () => {
    const controller = new AbortController();
    const emitted: number[] = [];
    let steps = 0;
    const step: ArStepFunction = async () => ({ latent: new Float32Array(LATENT_DIM).fill(steps++), eosLogit: -10 });
    for await (const latent of chunkLatents(step, { framesAfterEos: 3, maxFrames: 100, eosThreshold: -4, signal: controller.signal })) {
      emitted.push(latent[0]!);
      if (emitted.length === 2) controller.abort();
    }
    expect(emitted).toEqual([0, 1]);
    expect(steps).toBe(2);
  });

  test("max frames per chunk is ceil((n_tokens/3 + 2)·12.5), as in every golden chunk", () => {
    const chunks = GOLDEN.cases.end_to_end.cases.flatMap((entry: { chunks: { token_ids: number[]; max_gen_len: number }[] }) => entry.chunks);
    for (const chunk of chunks) expect(maxFramesForTokens(chunk.token_ids.length)).toBe(chunk.max_gen_len);
    expect(chunks.map((chunk: { max_gen_len: number }) => chunk.max_gen_len)).toEqual([50, 221, 230, 180, 105]);
  });
});

describe("noise", () => {
  test("the same seed gives the same noise; another seed does not", () => {
    const draw = (seed: number) => Array.from({ length: 5 }, () => Array.from(seededLatentNoise(seed, 0.7).next(LATENT_DIM)));
    expect(draw(42)).toEqual(draw(42));
    const a = seededLatentNoise(1, 0.7).next(LATENT_DIM);
    const b = seededLatentNoise(2, 0.7).next(LATENT_DIM);
    expect(a).not.toEqual(b);
  });

  test("x0 ~ N(0, temperature): √temperature · standard normals", () => {
    const noise = seededLatentNoise(7, 0.7);
    let sum = 0;
    let sumOfSquares = 0;
    const count = 32 * 4000;
    for (let row = 0; row < count / 32; row++) {
      for (const value of noise.next(32)) {
        sum += value;
        sumOfSquares += value * value;
      }
    }
    // Standard errors: mean 0.0023, variance 0.0028 at this count.
    expect(Math.abs(sum / count)).toBeLessThan(0.012);
    expect(Math.abs(sumOfSquares / count - 0.7)).toBeLessThan(0.015);
    expect(seededLatentNoise(7, 0).next(4)).toEqual(new Float32Array(4));
  });

  test("replay returns recorded rows in order and says when they run out", () => {
    const noise = replayLatentNoise(Float32Array.from({ length: 4 }, (_, index) => index));
    expect(noise.next(2)).toEqual(Float32Array.of(0, 1));
    expect(noise.next(2)).toEqual(Float32Array.of(2, 3));
    expect(() => noise.next(2)).toThrow("exhausted after 2 steps");
  });

  test("int64 seeds: each of those above 2^53 has its own stream, a bigint the stream of the equal number, and seeds below keep theirs", () => {
    const first = (seed: number | bigint) => Array.from(seededLatentNoise(seed, 1).next(3));
    const aboveDoubles = 2n ** 53n + 1n;
    expect(first(aboveDoubles)).not.toEqual(first(aboveDoubles - 1n));
    expect(first(2n ** 63n - 1n)).not.toEqual(first(2n ** 63n - 2n));
    expect(first(-(2n ** 63n))).toEqual(first(-(2n ** 63n)));
    expect(first(42n)).toEqual(first(42));
    expect(first(-1n)).toEqual(first(-1));
    // What these seeds drew before seeds were int64: golden and conformance outputs depend on them.
    expect(first(42)).toEqual([1.033046007156372, 0.02586478367447853, -0.578862726688385]);
    expect(first(4294967295)).toEqual([-0.2628284692764282, -0.302357941865921, 0.0963490828871727]);
    expect(first(-1)).toEqual([0.33378979563713074, 0.35269999504089355, -0.15011721849441528]);
    expect(() => seededLatentNoise(2n ** 63n, 1)).toThrow(RangeError);
    expect(() => seededLatentNoise(-(2n ** 63n) - 1n, 1)).toThrow(RangeError);
  });

  test("bad seeds and temperatures are refused", () => {
    expect(() => seededLatentNoise(0.5, 0.7)).toThrow(RangeError);
    expect(() => seededLatentNoise(1, -1)).toThrow(RangeError);
  });
});

describe("text → chunks", () => {
  test("the golden end-to-end texts give the golden chunk ids and frames_after_eos", async () => {
    const bundle = await loadPocketBundle(TINY_DIR);
    const tokenizer = await SentencePieceTokenizer.fromFile(bundle.tokenizer.format === "sentencepiece" ? bundle.tokenizer.modelPath : "");
    for (const golden of GOLDEN.cases.end_to_end.cases as { text: string; chunks: { text: string; token_ids: number[]; frames_after_eos: number }[] }[]) {
      const plan = planTextChunks(golden.text, tokenizer, bundle.flags);
      expect(plan).toEqual(golden.chunks.map((chunk) => ({ text: chunk.text, tokenIds: chunk.token_ids, framesAfterEos: chunk.frames_after_eos })));
    }
  });

  test("a model-recommended frames_after_eos replaces the guess", async () => {
    const bundle = await loadPocketBundle(TINY_DIR);
    const tokenizer = await SentencePieceTokenizer.fromFile(join(TINY_DIR, "tokenizer.model"));
    const plan = planTextChunks(GOLDEN.cases.end_to_end.cases[1].text, tokenizer, { ...bundle.flags, recommendedFramesAfterEos: 8 });
    expect(plan.map((chunk) => chunk.framesAfterEos)).toEqual([8, 8, 8, 8]);
  });

  for (const [name, text] of Object.entries(OVERLONG_INPUTS)) {
    test(`one sentence over the limit (${name}) is cut into chunks within it that keep every token`, async () => {
      const bundle = await loadPocketBundle(TINY_DIR);
      const tokenizer = await SentencePieceTokenizer.fromFile(join(TINY_DIR, "tokenizer.model"));
      const plan = planTextChunks(text, tokenizer, bundle.flags);
      expect(plan.length).toBeGreaterThan(1);
      expect(plan.every((chunk) => chunk.tokenIds.length >= 1 && chunk.tokenIds.length <= bundle.flags.maxTokensPerChunk)).toBe(true);
      // Upstream keeps a single sentence as one chunk: the pieces together are that chunk's tokens.
      expect(plan.flatMap((chunk) => chunk.tokenIds)).toEqual(tokenizer.encode(prepareTextPrompt(text, bundle.flags).text));
    });
  }

  test("the chunk budget is the bundle's limit unless the voice leaves less room for text and frames", () => {
    expect(chunkTokenBudget(50, 1000, 30)).toBe(50);
    // 900 + 14 + 84 frames = 998 fits; 900 + 15 + 88 = 1003 does not.
    expect(chunkTokenBudget(50, 1000, 900)).toBe(14);
    expect(900 + 14 + maxFramesForTokens(14)).toBeLessThanOrEqual(1000);
    expect(900 + 15 + maxFramesForTokens(15)).toBeGreaterThan(1000);
    expect(chunkTokenBudget(50, 1000, 999)).toBe(1);
  });
});

describe("speech generation on pocket-tiny", () => {
  let bundle: PocketBundle;
  let sessions: PocketSessions;
  let stages: PocketStages;
  let voice: FlowLmState;
  /** "Hello there, tiny model." (golden end_to_end[0]): 6 tokens, at most 50 frames. */
  const HELLO = { tokenIds: [2994, 310, 262, 2790, 1836, 263], framesAfterEos: 5 };

  beforeAll(async () => {
    bundle = await loadPocketBundle(TINY_DIR);
    sessions = await openPocketSessions(bundle);
    stages = await createPocketStages(bundle, sessions);
    voice = await voiceStateFromSafetensors(readFileSync(join(TINY_DIR, "voice_state.safetensors")), stages.flowLm);
  });

  afterAll(async () => {
    await closePocketSessions(sessions);
  });

  async function collect(request: Partial<GenerationRequest>): Promise<{ frames: GeneratedFrame[]; traces: StepTrace[] }> {
    const frames: GeneratedFrame[] = [];
    const traces: StepTrace[] = [];
    for await (const frame of generateSpeech(stages, { voice, chunks: [HELLO], onStep: (trace) => traces.push(trace), ...request })) frames.push(frame);
    return { frames, traces };
  }

  const audioOf = (frames: readonly GeneratedFrame[]) => frames.flatMap((frame) => Array.from(frame.samples));

  test("yields 1920-sample frames in order; the same seed reproduces the audio, another seed changes it", async () => {
    const first = await collect({ seed: 1234 });
    expect(first.frames.length).toBeGreaterThan(0);
    expect(first.frames.every((frame) => frame.samples.length === 1920 && frame.chunkIndex === 0)).toBe(true);
    expect(first.frames.map((frame) => frame.frameIndex)).toEqual(first.frames.map((_, index) => index));
    expect(first.frames).toHaveLength(first.traces.filter((trace) => trace.emitted).length);
    const again = await collect({ seed: 1234 });
    expect(audioOf(again.frames)).toEqual(audioOf(first.frames));
    const other = await collect({ seed: 4321 });
    expect(audioOf(other.frames)).not.toEqual(audioOf(first.frames));
  });

  test("aborting after 2 frames ends the stream: no more frames, no more steps", async () => {
    const controller = new AbortController();
    const frames: GeneratedFrame[] = [];
    const traces: StepTrace[] = [];
    // Never EOS, so only the abort can stop it before 50 frames.
    const request: GenerationRequest = { voice, chunks: [HELLO, HELLO], seed: 5, params: { eosThreshold: 100, decodeBatchFrames: 1 }, signal: controller.signal, onStep: (trace) => traces.push(trace) };
    for await (const frame of generateSpeech(stages, request)) {
      frames.push(frame);
      if (frames.length === 2) controller.abort();
    }
    expect(frames).toHaveLength(2);
    expect(traces).toHaveLength(2);
  });

  test("batched decoding gives the frame-by-frame audio; an abort stops it within one batch of steps", async () => {
    const run = async (decodeBatchFrames: number) => {
      const samples: number[] = [];
      const frames: GeneratedFrame[] = [];
      for await (const frame of generateSpeech(stages, { voice, chunks: [HELLO], seed: 8, params: { eosThreshold: 100, decodeBatchFrames } })) {
        frames.push(frame);
        samples.push(...frame.samples);
      }
      return { samples: Float32Array.from(samples), frames };
    };
    const single = await run(1);
    const batched = await run(4);
    expect(batched.frames.map((frame) => frame.frameIndex)).toEqual(single.frames.map((frame) => frame.frameIndex));
    expect(batched.frames.every((frame) => frame.samples.length === 1920)).toBe(true);
    expect(compareTensors(batched.samples, single.samples).relRms).toBeLessThan(RELATIVE_RMS_TOLERANCE);

    const controller = new AbortController();
    const traces: StepTrace[] = [];
    const frames: GeneratedFrame[] = [];
    for await (const frame of generateSpeech(stages, { voice, chunks: [HELLO, HELLO], seed: 5, params: { eosThreshold: 100, decodeBatchFrames: 4 }, signal: controller.signal, onStep: (trace) => traces.push(trace) })) {
      frames.push(frame);
      if (frames.length === 2) controller.abort();
    }
    expect(frames).toHaveLength(2);
    expect(traces.length).toBeLessThanOrEqual(2 + 3);
  });

  test("every chunk restarts from the voice state with a fresh decoder: identical chunks and noise give identical audio", async () => {
    const recorded: number[] = [];
    const seeded = seededLatentNoise(99, 0.7);
    const recording: LatentNoise = {
      next(latentDim) {
        const x0 = seeded.next(latentDim);
        recorded.push(...x0);
        return x0;
      },
    };
    const single = await collect({ noise: recording });
    const rows = Float32Array.from([...recorded, ...recorded]);
    const twice = await collect({ chunks: [HELLO, HELLO], noise: replayLatentNoise(rows) });
    const [chunk0, chunk1] = [0, 1].map((index) => twice.frames.filter((frame) => frame.chunkIndex === index));
    expect(audioOf(chunk0!)).toEqual(audioOf(single.frames));
    expect(audioOf(chunk1!)).toEqual(audioOf(single.frames));
  });

  test("frames_after_eos and max frames per chunk parameters override the chunk's own", async () => {
    const capped = await collect({ seed: 3, params: { eosThreshold: 100, maxFramesPerChunk: 4 } });
    expect(capped.traces).toHaveLength(4);
    expect(capped.frames).toHaveLength(4);
    const immediate = await collect({ seed: 3, params: { eosThreshold: -100, framesAfterEos: 0 } });
    expect(immediate.traces).toHaveLength(1);
    expect(immediate.frames).toHaveLength(0);
  });

  for (const [name, text] of Object.entries(OVERLONG_INPUTS)) {
    test(`text longer than the cache (${name}) speaks to the end: every chunk within the budget and heard`, async () => {
      const tokenizer = await SentencePieceTokenizer.fromFile(join(TINY_DIR, "tokenizer.model"));
      const budget = chunkTokenBudget(bundle.flags.maxTokensPerChunk, stages.flowLm.config.cachePositions, voice.positions);
      const chunks = planTextChunks(text, tokenizer, bundle.flags, budget);
      expect(chunks.every((chunk) => chunk.tokenIds.length <= budget)).toBe(true);
      const { frames } = await collect({ chunks, seed: 7 });
      expect(frames.every((frame) => frame.samples.length === 1920)).toBe(true);
      expect(new Set(frames.map((frame) => frame.chunkIndex))).toEqual(new Set(chunks.map((_, index) => index)));
    });
  }

  test("a long voice lowers the chunk budget so that its text and every capped frame still fit the cache", async () => {
    const longVoice = await stages.flowLm.prefill(voice, { data: new Float32Array((900 - voice.positions) * 64), dims: [1, 900 - voice.positions, 64] });
    const tokenizer = await SentencePieceTokenizer.fromFile(join(TINY_DIR, "tokenizer.model"));
    const chunks = planTextChunks("a ".repeat(100), tokenizer, bundle.flags, chunkTokenBudget(bundle.flags.maxTokensPerChunk, stages.flowLm.config.cachePositions, longVoice.positions));
    // Never EOS: each chunk runs its whole frame cap, which the cache must not cut short.
    const { frames } = await collect({ voice: longVoice, chunks, seed: 2, params: { eosThreshold: 100 } });
    const framesPerChunk = chunks.map((_, index) => frames.filter((frame) => frame.chunkIndex === index).length);
    expect(framesPerChunk).toEqual(chunks.map((chunk) => maxFramesForTokens(chunk.tokenIds.length)));
  });

  test("the frame cap shrinks to what is left of the 1000-position cache", async () => {
    // 30 voice + 964 filler positions + 6 tokens leaves 0 positions: not one AR step fits.
    const full = await stages.flowLm.prefill(voice, { data: new Float32Array(964 * 64), dims: [1, 964, 64] });
    const { frames, traces } = await collect({ voice: full, seed: 1, params: { eosThreshold: 100 } });
    expect(traces).toHaveLength(0);
    expect(frames).toHaveLength(0);
    const nearlyFull = await stages.flowLm.prefill(voice, { data: new Float32Array(961 * 64), dims: [1, 961, 64] });
    expect((await collect({ voice: nearlyFull, seed: 1, params: { eosThreshold: 100 } })).traces).toHaveLength(3);
  });
});

describe("decodeAlongside", () => {
  const LATENT = 2;
  /** Latents [k, k] for k = 0 … count − 1, each sampled after `sampleMs`, with a log of what happened when. */
  async function* sampled(count: number, log: string[], sampleMs = 0): AsyncGenerator<Float32Array> {
    for (let k = 0; k < count; k++) {
      if (sampleMs > 0) await Bun.sleep(sampleMs);
      log.push(`sampled ${k}`);
      yield Float32Array.of(k, k);
    }
  }
  /** A decoder whose "audio" is the latents' first values, logging each batch's size. */
  const fakeDecoder = (concurrent: boolean, log: string[], decodeMs = 0) => ({
    concurrent,
    async decode(batch: Float32Array) {
      log.push(`decode ${batch.length / LATENT}`);
      if (decodeMs > 0) await Bun.sleep(decodeMs);
      return Float32Array.from({ length: batch.length / LATENT }, (_, index) => batch[index * LATENT]!);
    },
  });

  test("in turn: batches of 1, 2, 4, … up to the cap, every latent once and in order", async () => {
    const log: string[] = [];
    const audio: number[] = [];
    for await (const piece of decodeAlongside(sampled(20, log), fakeDecoder(false, log), { latentDim: LATENT, maxBatchFrames: 4 })) audio.push(...piece);
    expect(audio).toEqual(Array.from({ length: 20 }, (_, k) => k));
    expect(log.filter((entry) => entry.startsWith("decode"))).toEqual(["decode 1", "decode 2", "decode 4", "decode 4", "decode 4", "decode 4", "decode 1"]);
    // Sequential: nothing is sampled while a batch decodes, so each decode directly follows its last latent.
    expect(log.slice(0, 4)).toEqual(["sampled 0", "decode 1", "sampled 1", "sampled 2"]);
  });

  test("concurrent: sampling goes on during a decode; batches keep the schedule whatever the timing, and the order", async () => {
    const log: string[] = [];
    const audio: number[] = [];
    for await (const piece of decodeAlongside(sampled(30, log, 2), fakeDecoder(true, log, 15), { latentDim: LATENT, maxBatchFrames: 8 })) audio.push(...piece);
    expect(audio).toEqual(Array.from({ length: 30 }, (_, k) => k));
    const decodeIndex = log.indexOf("decode 1");
    // The first latent is decoded alone and the next ones are sampled while it decodes.
    expect(log[decodeIndex - 1]).toBe("sampled 0");
    expect(log[decodeIndex + 1]).toBe("sampled 1");
    const sizes = log.filter((entry) => entry.startsWith("decode")).map((entry) => Number(entry.split(" ")[1]));
    // Latents pile up during each 15 ms decode (one per 2 ms), yet the split is the schedule's, so the same
    // seed gives the same float rounding.
    expect(sizes).toEqual([1, 2, 4, 8, 8, 7]);
    // Sampling ran ahead: the batch of latents 3–6 started only when the 15 ms decode of 1–2 ended, by
    // which time later latents had been sampled (in turn, "decode 4" would follow "sampled 6").
    expect(log.indexOf("sampled 7")).toBeLessThan(log.indexOf("decode 4"));
  });

  test("concurrent: a consumer that stops early returns only after the decode in flight is done", async () => {
    const log: string[] = [];
    const decoder = fakeDecoder(true, log, 20);
    const finished: string[] = [];
    const tracked = { concurrent: true, decode: async (batch: Float32Array) => { const audio = await decoder.decode(batch); finished.push(`decoded ${batch.length / LATENT}`); return audio; } };
    const stream = decodeAlongside(sampled(50, log, 1), tracked, { latentDim: LATENT, maxBatchFrames: 4 });
    await stream.next();
    // The second batch is decoding while the consumer leaves.
    await Bun.sleep(5);
    const started = log.filter((entry) => entry.startsWith("decode")).length;
    await stream.return(undefined);
    expect(finished.length).toBe(started);
  });

  test("concurrent: a decode that fails ends the stream with its error, and sampling is stopped", async () => {
    const log: string[] = [];
    const failing = { concurrent: true, decode: async () => Promise.reject(new Error("decoder lost")) };
    const latents = sampled(100, log, 1);
    await expect(async () => {
      for await (const _ of decodeAlongside(latents, failing, { latentDim: LATENT, maxBatchFrames: 4 })) {
        // nothing is decoded
      }
    }).toThrow("decoder lost");
    const sampledCount = log.length;
    await Bun.sleep(20);
    expect(log.length).toBe(sampledCount);
    expect(sampledCount).toBeLessThan(10);
  });
});
