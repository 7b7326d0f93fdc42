/**
 * The Pocket TTS generation loop (docs/pocket-tts.md §2.2), streaming: each latent frame is decoded and
 * yielded (1920 samples, 80 ms) as soon as it exists.
 *
 * Per text chunk:
 * 1. Start from the cached voice state (an immutable value, so "copy the voice state" costs nothing) and
 *    prefill the chunk's text conditioning.
 * 2. AR loop, k = 0 … maxFrames−1: run the FlowLM step (BOS first, then the previous latent), draw x0,
 *    LSD-decode the latent; `eosStep` = first k whose raw EOS logit exceeds the threshold; stop *without
 *    emitting* latent k once k ≥ eosStep + framesAfterEos; otherwise emit it and feed it back.
 * 3. Decode emitted latents with a Mimi decoder state that is fresh for every chunk (§6.13); chunks are
 *    concatenated without crossfade.
 *
 * All per-request state (FlowLM and Mimi states, the RNG, EOS bookkeeping) lives in locals of the
 * generator, owned by the request.
 */
import { concatFloat32 } from "../../audio/concat.ts";
import type { PocketModelFlags } from "./bundle.ts";
import type { FlowHead } from "./stages/flow-head.ts";
import type { FlowLm } from "./stages/flow-lm.ts";
import type { FlowLmState } from "./stages/state.ts";
import type { LatentDecoder } from "./stages/mimi-decoder.ts";
import type { TextConditioner } from "./stages/text-conditioner.ts";
import { framesAfterEosGuessFor, splitIntoBestSentences, splitTokensWithinBudget } from "./text-prompt.ts";
import type { SentencePieceTokenizer } from "../../text/sentencepiece.ts";

export interface GenerationParams {
  /** Noise variance: x0 ~ N(0, temperature) (§1.11). Upstream default 0.7. */
  temperature: number;
  /** Euler steps of the LSD decode (§1.11). Upstream default 1. */
  lsdSteps: number;
  /** EOS when the raw logit exceeds this (§1.7). Upstream default −4.0. */
  eosThreshold: number;
  /** Replaces every chunk's own frames-after-EOS (model recommendation or guess + 2, §1.12). */
  framesAfterEos?: number;
  /** Lowers the per-chunk frame cap below the upstream ceil((n_tokens/3 + 2)·12.5). */
  maxFramesPerChunk?: number;
  /** Most latents per decoder call once a chunk's first frame is out (1 = frame by frame). */
  decodeBatchFrames: number;
}

/** Upstream defaults at HEAD (§1.12). */
export const DEFAULT_GENERATION_PARAMS: Readonly<GenerationParams> = Object.freeze({ temperature: 0.7, lsdSteps: 1, eosThreshold: -4.0, decodeBatchFrames: 8 });

/** One independently generated piece of text (§1.13 step 6). */
export interface TextChunk {
  /** The chunk's text, when it came from `planTextChunks`. */
  text?: string;
  /** SentencePiece ids of the chunk text, no BOS/EOS (§1.8). */
  tokenIds: readonly number[];
  /** Latents emitted from the EOS step on (§1.12: model recommendation, else prepare_text_prompt's guess + 2). */
  framesAfterEos: number;
}

/**
 * Text → independently generated chunks (§1.13): upstream's splitter packs sentences into chunks of at
 * most `maxTokensPerChunk` tokens; each chunk text is tokenized as is, and its own `prepare_text_prompt`
 * only supplies the frames-after-EOS guess (+ 2 unless the model recommends a value, §1.12).
 *
 * Upstream lets one sentence exceed the limit; such a chunk is cut into pieces within it (at word starts,
 * else inside the word), each keeping its slice of the chunk's token ids, so that any text fits the cache.
 */
export function planTextChunks(text: string, tokenizer: SentencePieceTokenizer, flags: PocketModelFlags, maxTokensPerChunk = flags.maxTokensPerChunk): TextChunk[] {
  const options = { padWithSpacesForShortInputs: flags.padWithSpacesForShortInputs, removeSemicolons: flags.removeSemicolons };
  const framesAfterEosOf = (chunkText: string) => flags.recommendedFramesAfterEos ?? framesAfterEosGuessFor(chunkText) + FRAMES_AFTER_EOS_MARGIN;
  return splitIntoBestSentences(text, tokenizer, options, maxTokensPerChunk).flatMap((chunkText) => {
    const tokenIds = tokenizer.encode(chunkText);
    if (tokenIds.length <= maxTokensPerChunk) return [{ text: chunkText, tokenIds, framesAfterEos: framesAfterEosOf(chunkText) }];
    return splitTokensWithinBudget(tokenIds, maxTokensPerChunk, tokenizer).map((pieceIds) => {
      const pieceText = tokenizer.decode(pieceIds);
      return { text: pieceText, tokenIds: pieceIds, framesAfterEos: framesAfterEosOf(pieceText) };
    });
  });
}

/**
 * Most text tokens a chunk may hold after a voice of `voicePositions`: the bundle's max_token_per_chunk,
 * lowered until the voice, the text and the chunk's frame cap all fit in the FlowLM cache (§3.1: voice +
 * text + generated positions ≤ 1000). Upstream's 50 tokens (+ 234 frames) leave room for voices up to
 * 716 positions (57 s); an uploaded voice is at most 30 s. Never below one token: a voice that leaves less
 * room only shortens its chunks' frame cap (`generateSpeech`).
 */
export function chunkTokenBudget(maxTokensPerChunk: number, cachePositions: number, voicePositions: number): number {
  let tokens = maxTokensPerChunk;
  while (tokens > 1 && voicePositions + tokens + maxFramesForTokens(tokens) > cachePositions) tokens--;
  return tokens;
}

/** Upstream adds 2 frames to prepare_text_prompt's guess (§1.12: 3 or 5 frames). */
const FRAMES_AFTER_EOS_MARGIN = 2;

/** Frame cap of a chunk since upstream 2026-02-03 (§1.12): ceil((n_tokens/3 + 2)·12.5). */
export function maxFramesForTokens(tokenCount: number): number {
  return Math.ceil((tokenCount / 3 + 2) * 12.5);
}

// ---------------------------------------------------------------------------------------------------
// Noise (§1.11)

/** Source of x0 for each AR step, in step order across chunks (including each chunk's final, non-emitted step). */
export interface LatentNoise {
  /** x0 [latentDim], already scaled: √temperature · z. */
  next(latentDim: number): Float32Array;
}

/**
 * Seeded Gaussian noise: xoshiro128** (Blackman & Vigna 2018; 128-bit state, period 2^128 − 1, passes
 * BigCrush, 32-bit operations only, so it is fast in JS) seeded through SplitMix64, as its authors
 * recommend, so that nearby seeds give unrelated streams. Normals come from Box–Muller on 53-bit
 * uniforms, both outputs used.
 *
 * Same seed → same noise in one JS engine. Across engines (Bun's JavaScriptCore vs Deno's V8) Math.log,
 * cos and sin may differ in the last bit of a double, which the float32 rounding of x0 almost always hides.
 */
export function seededLatentNoise(seed: number, temperature: number): LatentNoise {
  if (!Number.isSafeInteger(seed)) throw new RangeError(`seed must be a safe integer, got ${seed}`);
  if (!(temperature >= 0)) throw new RangeError(`temperature must be ≥ 0, got ${temperature}`);
  const random = xoshiro128StarStar(seed);
  const standardDeviation = Math.sqrt(temperature);
  let spare: number | undefined;
  const gaussian = (): number => {
    if (spare !== undefined) {
      const value = spare;
      spare = undefined;
      return value;
    }
    // u1 ∈ (0, 1] so that log(u1) is finite; u2 ∈ [0, 1).
    const u1 = 1 - uniform53(random);
    const u2 = uniform53(random);
    const radius = Math.sqrt(-2 * Math.log(u1));
    spare = radius * Math.sin(2 * Math.PI * u2);
    return radius * Math.cos(2 * Math.PI * u2);
  };
  return {
    next(latentDim) {
      const x0 = new Float32Array(latentDim);
      for (let index = 0; index < latentDim; index++) x0[index] = standardDeviation * gaussian();
      return x0;
    },
  };
}

/** Replays recorded x0 rows [steps, latentDim] (the golden `noise` tensors) in order. */
export function replayLatentNoise(rows: Float32Array): LatentNoise {
  let offset = 0;
  return {
    next(latentDim) {
      if (offset + latentDim > rows.length) throw new RangeError(`recorded noise exhausted after ${offset / latentDim} steps`);
      const x0 = rows.slice(offset, offset + latentDim);
      offset += latentDim;
      return x0;
    },
  };
}

/** xoshiro128** 1.1 (https://prng.di.unimi.it/xoshiro128starstar.c); returns uint32 values. */
function xoshiro128StarStar(seed: number): () => number {
  // SplitMix64 expands the seed into the 128-bit state; it never yields four zero words.
  let splitState = BigInt.asUintN(64, BigInt(seed));
  const splitMix64 = (): bigint => {
    splitState = BigInt.asUintN(64, splitState + 0x9e3779b97f4a7c15n);
    let z = splitState;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    return z ^ (z >> 31n);
  };
  const first = splitMix64();
  const second = splitMix64();
  let s0 = Number(first & 0xffffffffn) | 0;
  let s1 = Number(first >> 32n) | 0;
  let s2 = Number(second & 0xffffffffn) | 0;
  let s3 = Number(second >> 32n) | 0;
  return () => {
    const result = Math.imul(rotateLeft(Math.imul(s1, 5), 7), 9) >>> 0;
    const shifted = s1 << 9;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= shifted;
    s3 = rotateLeft(s3, 11);
    return result;
  };
}

function rotateLeft(value: number, bits: number): number {
  return (value << bits) | (value >>> (32 - bits));
}

/** A uniform double in [0, 1) with 53 random bits (27 + 26 from two draws). */
function uniform53(random: () => number): number {
  return ((random() >>> 5) * 67_108_864 + (random() >>> 6)) / 9_007_199_254_740_992;
}

// ---------------------------------------------------------------------------------------------------
// The per-chunk AR loop (§2.2 "Loop rule, exact")

/** What one AR step produced: the sampled normalised latent [latentDim] and the raw EOS logit. */
export interface ArStepOutput {
  latent: Float32Array;
  eosLogit: number;
}

/** Runs AR step k given its input latent (null = BOS at k = 0, else the latent emitted at k − 1). */
export type ArStepFunction = (inputLatent: Float32Array | null) => Promise<ArStepOutput>;

/** Every AR step as it happened, emitted or not (for conformance against golden runs). */
export interface StepTrace extends ArStepOutput {
  chunkIndex: number;
  /** k within the chunk. */
  step: number;
  isEos: boolean;
  emitted: boolean;
}

export interface ChunkLoopOptions {
  framesAfterEos: number;
  maxFrames: number;
  eosThreshold: number;
  signal?: AbortSignal;
  chunkIndex?: number;
  onStep?: (trace: StepTrace) => void;
}

/**
 * Yields the latents to emit for one chunk. Stops at the frame cap, at the EOS rule (the step that
 * triggers it is run but not emitted), or before the next step once `signal` is aborted.
 */
export async function* chunkLatents(step: ArStepFunction, options: ChunkLoopOptions): AsyncGenerator<Float32Array, void, undefined> {
  const { framesAfterEos, maxFrames, eosThreshold, signal, chunkIndex = 0, onStep } = options;
  if (!Number.isInteger(framesAfterEos) || framesAfterEos < 0) throw new RangeError(`frames_after_eos must be a non-negative integer, got ${framesAfterEos}`);
  let eosStep: number | undefined;
  let input: Float32Array | null = null;
  for (let k = 0; k < maxFrames; k++) {
    if (signal?.aborted) return;
    const { latent, eosLogit } = await step(input);
    const isEos = eosLogit > eosThreshold;
    if (isEos && eosStep === undefined) eosStep = k;
    const stop = eosStep !== undefined && k >= eosStep + framesAfterEos;
    onStep?.({ chunkIndex, step: k, latent, eosLogit, isEos, emitted: !stop });
    if (stop) return;
    yield latent;
    input = latent;
  }
}

// ---------------------------------------------------------------------------------------------------
// Speech generation over the model stages

/** The stages generation needs (the voice encoder is only needed to make a voice state). */
export interface GenerationStages {
  textConditioner: TextConditioner;
  flowLm: FlowLm;
  flowHead: FlowHead;
  /** The ONNX decoder or the WGSL one: both keep the same decode contract. */
  mimiDecoder: LatentDecoder<unknown>;
}

export interface GenerationRequest {
  /** FlowLM state after the voice prefill (§2.1), shared read-only by every chunk. */
  voice: FlowLmState;
  chunks: readonly TextChunk[];
  params?: Partial<GenerationParams>;
  /** x0 source; default: `seededLatentNoise(seed, temperature)`. */
  noise?: LatentNoise;
  /** Seed of the default noise; default: a random one. */
  seed?: number;
  signal?: AbortSignal;
  onStep?: (trace: StepTrace) => void;
}

export interface GeneratedFrame {
  /** Raw float PCM at the model rate, unclamped (§6.17): [samplesPerFrame] = 1920. */
  samples: Float32Array;
  chunkIndex: number;
  /** Index of this frame within its chunk. */
  frameIndex: number;
}

/** Streams the audio of `request.chunks`, one decoded latent frame at a time. */
export async function* generateSpeech(stages: GenerationStages, request: GenerationRequest): AsyncGenerator<GeneratedFrame, void, undefined> {
  const params: GenerationParams = { ...DEFAULT_GENERATION_PARAMS, ...request.params };
  const noise = request.noise ?? seededLatentNoise(request.seed ?? Math.floor(Math.random() * 2 ** 32), params.temperature);
  const { signal } = request;
  const { latentDim, cachePositions } = stages.flowLm.config;

  for (const [chunkIndex, chunk] of request.chunks.entries()) {
    if (signal?.aborted) return;
    if (chunk.tokenIds.length === 0) throw new RangeError(`text chunk ${chunkIndex} has no tokens`);
    const textConditioning = await stages.textConditioner.embed(chunk.tokenIds);
    let flowState = await stages.flowLm.prefill(request.voice, textConditioning);
    // Each AR step adds one cache position; stop before the static cache overflows (§6.10).
    const maxFrames = Math.min(maxFramesForTokens(chunk.tokenIds.length), params.maxFramesPerChunk ?? Infinity, cachePositions - flowState.positions);

    const step: ArStepFunction = async (inputLatent) => {
      // flowState is this chunk's own (the prefill above copied the shared voice caches), so each step
      // may write into it.
      const result = await stages.flowLm.step(flowState, inputLatent, { reuseState: true });
      flowState = result.state;
      const latent = await stages.flowHead.sample(result.conditioning, noise.next(latentDim), params.lsdSteps);
      return { latent, eosLogit: result.eosLogit };
    };

    let decoderState = stages.mimiDecoder.emptyState();
    const decoder: LatentBatchDecoder = {
      concurrent: stages.mimiDecoder.concurrent,
      async decode(batch) {
        const decoded = await stages.mimiDecoder.decode(decoderState, batch, { reuseState: true });
        decoderState = decoded.state;
        return decoded.audio;
      },
    };
    const latents = chunkLatents(step, {
      framesAfterEos: params.framesAfterEos ?? chunk.framesAfterEos,
      maxFrames,
      eosThreshold: params.eosThreshold,
      signal,
      chunkIndex,
      onStep: request.onStep,
    });
    let frameIndex = 0;
    try {
      for await (const audio of decodeAlongside(latents, decoder, { latentDim, maxBatchFrames: params.decodeBatchFrames })) {
        const samplesPerFrame = stages.mimiDecoder.config.samplesPerFrame;
        for (let offset = 0; offset < audio.length; offset += samplesPerFrame) {
          if (signal?.aborted) return;
          yield { samples: audio.subarray(offset, offset + samplesPerFrame), chunkIndex, frameIndex: frameIndex++ };
        }
      }
    } finally {
      stages.mimiDecoder.release?.(decoderState);
    }
  }
}

/** What decodes latents for `decodeAlongside`. */
export interface LatentBatchDecoder {
  decode(batch: Float32Array): Promise<Float32Array>;
  /**
   * True when a decode runs off the JS thread (a worker), so it can overlap the sampling of the next
   * latents; in-process runs of either onnxruntime package block the thread (onnxruntime-web also refuses
   * a second run while one is in progress), so there latents are sampled and decoded in turn.
   */
  concurrent: boolean;
}

/**
 * Decodes a chunk's latents in growing batches, each batch's audio yielded as soon as it is decoded. The
 * first latent is decoded alone, so first audio leaves at once; later batches take at least 1, 2, 4, … up
 * to `maxBatchFrames` latents (doubling with the latents already sent), since one decoder call on k latents
 * costs far less than k calls (anchors: 18.9 → 6.2 ms/frame from 1 to 15 per call). With a concurrent
 * decoder, sampling goes on while a batch decodes; latents that pile up meanwhile wait for their batch.
 * Any split of the latents into calls gives the same audio (§1.3 streaming state); batches decode in order.
 */
export async function* decodeAlongside(latents: AsyncIterable<Float32Array>, decoder: LatentBatchDecoder, options: { latentDim: number; maxBatchFrames: number }): AsyncGenerator<Float32Array, void, undefined> {
  const pending: Float32Array[] = [];
  let sentFrames = 0;
  // Batch sizes follow the schedule alone, never timing: a different split changes float rounding, and
  // the same seed must give the same bytes.
  const batchSize = () => Math.min(options.maxBatchFrames, sentFrames + 1);
  const takeBatch = (count = pending.length) => {
    const batch = concatFloat32(pending.splice(0, count));
    sentFrames += batch.length / options.latentDim;
    return batch;
  };
  const batchIsDue = () => pending.length >= batchSize();

  if (!decoder.concurrent) {
    for await (const latent of latents) {
      pending.push(latent);
      if (batchIsDue()) yield await decoder.decode(takeBatch());
    }
    if (pending.length > 0) yield await decoder.decode(takeBatch());
    return;
  }

  const iterator = latents[Symbol.asyncIterator]();
  let inFlight = null as Promise<Float32Array> | null;
  let next = iterator.next();
  // Both promises are awaited below; these handlers keep an abandoned one's rejection from going unhandled.
  next.catch(() => {});
  try {
    const startDueBatch = () => {
      if (inFlight || !batchIsDue()) return;
      inFlight = decoder.decode(takeBatch(batchSize()));
      inFlight.catch(() => {});
    };
    for (;;) {
      if (inFlight) {
        const audioFirst = await Promise.race([inFlight.then(() => true), next.then(() => false)]);
        if (audioFirst) {
          const audio = await inFlight;
          inFlight = null;
          startDueBatch();
          yield audio;
          continue;
        }
      }
      const result = await next;
      if (result.done) break;
      pending.push(result.value);
      next = iterator.next();
      next.catch(() => {});
      startDueBatch();
    }
    while (inFlight) {
      const audio: Float32Array = await inFlight;
      inFlight = null;
      startDueBatch();
      yield audio;
    }
    if (pending.length > 0) yield await decoder.decode(takeBatch());
  } finally {
    // A decode still running when the consumer stops is waited for, so the caller may release the state.
    await inFlight?.catch(() => {});
    await iterator.return?.();
  }
}
