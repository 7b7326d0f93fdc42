/** generate.ts: generations run by the server's engine and runner on pocket-tiny, as the conformance harness and the benches run them. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generate, generateTogether, type ModelTiming } from "../../src/engine/generate.ts";
import { loadPocketBundle } from "../../src/models/pocket/bundle/load.ts";
import { type PocketBundle } from "../../src/models/pocket/bundle/pocket-bundle.ts";
import { chunkTokenBudget, maxFramesForTokens, planTextChunks } from "../../src/models/pocket/text-chunks.ts";
import type { Generation, StepTrace } from "../../src/models/pocket/request-state.ts";
import { generationJob, PocketRunner, type PocketAudioChunk, type RunnerDecoder } from "../../src/models/pocket/runner.ts";
import { replayLatentNoise, seededLatentNoise, type LatentNoise } from "../../src/models/pocket/noise.ts";
import { closePocketSessions, openPocketSessions, type PocketSessions } from "../../src/models/pocket/sessions.ts";
import { createPocketStages, type PocketStages } from "../../src/models/pocket/pipeline.ts";
import { voiceStateFromSafetensors } from "../../src/models/pocket/stages/flow-lm.ts";
import type { FlowLmState, MimiState } from "../../src/models/pocket/stages/state.ts";
import { SentencePieceTokenizer } from "../../src/text/sentencepiece.ts";
import { compareTensors, RELATIVE_RMS_TOLERANCE } from "../../src/conformance/report.ts";
import { OVERLONG_INPUTS } from "../models/pocket/overlong-inputs.ts";

const TINY_DIR = join(import.meta.dir, "../../../shared/fixtures/pocket-tiny");

describe("speech generation on pocket-tiny", () => {
  let bundle: PocketBundle;
  let sessions: PocketSessions;
  let stages: PocketStages;
  let voice: FlowLmState;
  let runner: PocketRunner;
  let timing: ModelTiming;
  /** "Hello there, tiny model." (golden end_to_end[0]): 6 tokens, at most 50 frames. */
  const HELLO = { tokenIds: [2994, 310, 262, 2790, 1836, 263], framesAfterEos: 5 };

  beforeAll(async () => {
    bundle = await loadPocketBundle(TINY_DIR);
    sessions = await openPocketSessions(bundle);
    stages = await createPocketStages(bundle, sessions);
    voice = await voiceStateFromSafetensors(readFileSync(join(TINY_DIR, "voice_state.safetensors")), stages.flowLm);
    runner = PocketRunner.forStages(stages, bundle.dims.sampleRateHz);
    timing = { nativeSampleRateHz: bundle.dims.sampleRateHz, framesPerSecond: bundle.dims.frameRateHz };
  });

  afterAll(async () => {
    await closePocketSessions(sessions);
  });

  /** A generation's frames as the engine yields them (the runner's chunks, one frame each), until `signal` aborts. */
  function framesOf(generation: Generation, on = runner, signal?: AbortSignal): AsyncGenerator<PocketAudioChunk, void, undefined> {
    return generate(on, timing, generationJob(generation, signal)) as AsyncGenerator<PocketAudioChunk, void, undefined>;
  }

  async function collect(request: Partial<Generation>, on = runner): Promise<{ frames: PocketAudioChunk[]; traces: StepTrace[] }> {
    const frames: PocketAudioChunk[] = [];
    const traces: StepTrace[] = [];
    for await (const frame of framesOf({ voice, chunks: [HELLO], onStep: (trace) => traces.push(trace), ...request }, on)) frames.push(frame);
    return { frames, traces };
  }

  const audioOf = (frames: readonly PocketAudioChunk[]) => frames.flatMap((frame) => Array.from(frame.samples));

  /**
   * The in-process decoder behind a log of each call ("decode <n> start <frames>", "decode <n> end"). With
   * `concurrent`, the runner may leave a call in flight while it samples, as with a worker; `before(call)` runs
   * first (a wait standing in for the worker's round trip, or a failure).
   */
  function loggedDecoder(log: string[], options: { concurrent: boolean; before?: (call: number) => Promise<void> }): RunnerDecoder {
    const decoder = stages.mimiDecoder;
    let calls = 0;
    return {
      config: decoder.config,
      concurrent: options.concurrent,
      emptyState: () => decoder.emptyState(),
      async decode(state, latents, decodeOptions) {
        const call = ++calls;
        log.push(`decode ${call} start ${latents.length / decoder.config.latentDim}`);
        await options.before?.(call);
        const decoded = await decoder.decode(state as MimiState, latents, decodeOptions);
        log.push(`decode ${call} end`);
        return decoded;
      },
    };
  }
  const decodeSizes = (log: readonly string[]) => log.filter((entry) => / start /.test(entry)).map((entry) => Number(entry.split(" ").at(-1)));
  /** The log entries made while decode `call` ran. */
  const duringDecode = (log: readonly string[], call: number) => log.slice(log.findIndex((entry) => entry.startsWith(`decode ${call} start`)) + 1, log.indexOf(`decode ${call} end`));

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
    expect(runner.stateBytes()).toBe(0);
  });

  /** Steps stop once the stream has ended: none runs after it, and they stopped short of the 100 the two chunks allow. */
  async function expectStepsStopped(traces: readonly StepTrace[]): Promise<void> {
    const steps = traces.length;
    await Bun.sleep(20);
    expect(traces).toHaveLength(steps);
    expect(steps).toBeLessThan(100);
  }

  test("aborting after 2 frames ends the stream: no more frames, no more steps", async () => {
    const controller = new AbortController();
    const frames: PocketAudioChunk[] = [];
    const traces: StepTrace[] = [];
    // Never EOS, so only the abort can stop it before 100 frames.
    const request: Generation = { voice, chunks: [HELLO, HELLO], seed: 5, params: { eosThreshold: 100, decodeBatchFrames: 1 }, onStep: (trace) => traces.push(trace) };
    for await (const frame of framesOf(request, runner, controller.signal)) {
      frames.push(frame);
      if (frames.length === 2) controller.abort();
    }
    expect(frames).toHaveLength(2);
    await expectStepsStopped(traces);
    expect(runner.stateBytes()).toBe(0);
  });

  test("batched decoding gives the frame-by-frame audio; an abort ends it", async () => {
    const run = async (decodeBatchFrames: number) => {
      const samples: number[] = [];
      const frames: PocketAudioChunk[] = [];
      for await (const frame of framesOf({ voice, chunks: [HELLO], seed: 8, params: { eosThreshold: 100, decodeBatchFrames } })) {
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
    const frames: PocketAudioChunk[] = [];
    for await (const frame of framesOf({ voice, chunks: [HELLO, HELLO], seed: 5, params: { eosThreshold: 100, decodeBatchFrames: 4 }, onStep: (trace) => traces.push(trace) }, runner, controller.signal)) {
      frames.push(frame);
      if (frames.length === 2) controller.abort();
    }
    expect(frames).toHaveLength(2);
    await expectStepsStopped(traces);
  });

  /** 20 frames, never EOS, decoded 1, 2, then 4 at a time. */
  const SCHEDULED: Partial<Generation> = { seed: 8, params: { eosThreshold: 100, maxFramesPerChunk: 20, decodeBatchFrames: 4 } };

  test("in turn: decodes of 1, 2, 4, … up to decodeBatchFrames, nothing sampled while one runs", async () => {
    const log: string[] = [];
    const inTurn = PocketRunner.forStages(stages, bundle.dims.sampleRateHz, loggedDecoder(log, { concurrent: false }));
    const { frames } = await collect({ ...SCHEDULED, onStep: (trace) => log.push(`step ${trace.step}`) }, inTurn);
    expect(frames).toHaveLength(20);
    expect(decodeSizes(log)).toEqual([1, 2, 4, 4, 4, 4, 1]);
    for (let call = 1; call <= 7; call++) expect(duringDecode(log, call)).toEqual([]);
    // The first latent is decoded alone, at once.
    expect(log.slice(0, 3)).toEqual(["step 0", "decode 1 start 1", "decode 1 end"]);
  });

  test("concurrent: a second decode batch is in flight while sampling goes on; the schedule and the bytes are those of decoding in turn", async () => {
    // The whole 50-frame cap, so that sampling is still going when the second decode starts.
    const LONG: Partial<Generation> = { seed: 8, params: { eosThreshold: 100, decodeBatchFrames: 4 } };
    const inTurn = await collect(LONG);
    const log: string[] = [];
    // The second decode is held until three more steps have run beside it (or 2 s, for a driver that waits on it).
    let openGate = () => {};
    const gate = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 2000);
      openGate = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    let stepsBesideSecond = -1;
    const onStep = (trace: StepTrace) => {
      log.push(`step ${trace.step}`);
      if (stepsBesideSecond >= 0 && ++stepsBesideSecond === 3) openGate();
    };
    const decoder = loggedDecoder(log, {
      concurrent: true,
      before: async (call) => {
        if (call !== 2) return;
        stepsBesideSecond = 0;
        await gate;
      },
    });
    const overlapped = await collect({ ...LONG, onStep }, PocketRunner.forStages(stages, bundle.dims.sampleRateHz, decoder));
    expect(duringDecode(log, 2).filter((entry) => entry.startsWith("step"))).toHaveLength(3);
    expect(decodeSizes(log)).toEqual([1, 2, ...Array<number>(11).fill(4), 3]);
    expect(audioOf(overlapped.frames)).toEqual(audioOf(inTurn.frames));
  });

  test("concurrent: a consumer that stops early returns only after the decode in flight has settled, and sampling stops", async () => {
    const log: string[] = [];
    const decoder = loggedDecoder(log, { concurrent: true, before: (call) => (call > 1 ? Bun.sleep(30) : Promise.resolve()) });
    const decodingRunner = PocketRunner.forStages(stages, bundle.dims.sampleRateHz, decoder);
    const stream = framesOf({ voice, chunks: [HELLO], ...SCHEDULED, onStep: (trace) => log.push(`step ${trace.step}`) }, decodingRunner);
    const started = () => decodeSizes(log).length;
    const ended = () => log.filter((entry) => entry.endsWith(" end")).length;
    // Frames are taken until one is handed out while the next decode runs.
    for (let result = await stream.next(); !result.done && started() === ended(); ) result = await stream.next();
    expect(started()).toBe(ended() + 1);
    await stream.return(undefined);
    expect(ended()).toBe(started());
    const entries = log.length;
    await Bun.sleep(20);
    expect(log).toHaveLength(entries);
    expect(decodingRunner.stateBytes()).toBe(0);
  });

  test("concurrent: a decode that fails ends the stream with its error, and sampling stops", async () => {
    const log: string[] = [];
    const decoder = loggedDecoder(log, { concurrent: true, before: async () => Promise.reject(new Error("decoder lost")) });
    const failingRunner = PocketRunner.forStages(stages, bundle.dims.sampleRateHz, decoder);
    await expect(collect({ seed: 3, params: { eosThreshold: 100 }, onStep: (trace) => log.push(`step ${trace.step}`) }, failingRunner)).rejects.toThrow("decoder lost");
    await Bun.sleep(10);
    const steps = log.filter((entry) => entry.startsWith("step")).length;
    await Bun.sleep(20);
    expect(log.filter((entry) => entry.startsWith("step"))).toHaveLength(steps);
    expect(steps).toBeLessThan(50);
    expect(failingRunner.stateBytes()).toBe(0);
  });

  test("requests run together share every FlowLM call, and each gets the audio it gets alone", async () => {
    const requests: Generation[] = [
      { voice, chunks: [HELLO], seed: 11 },
      { voice, chunks: [HELLO, HELLO], seed: 12, params: { eosThreshold: 100, maxFramesPerChunk: 9 } },
    ];
    const alone: number[][] = [];
    for (const request of requests) alone.push(audioOf((await collect(request)).frames));
    const flowLmRows: number[] = [];
    const together = (await generateTogether(runner, timing, requests.map((request) => generationJob(request)), (_, sizes) => flowLmRows.push(...(sizes.flow_lm ?? [])))) as PocketAudioChunk[][];
    expect(audioOf(together[0]!)).toEqual(alone[0]!);
    expect(audioOf(together[1]!)).toEqual(alone[1]!);
    expect(Math.max(...flowLmRows)).toBe(2);
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

  test("a chunk without tokens fails the generation with a RangeError", async () => {
    await expect(collect({ seed: 1, chunks: [{ tokenIds: [], framesAfterEos: 2 }] })).rejects.toThrow(RangeError);
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
