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
import type { PocketModelFlags } from "./bundle/pocket-bundle.ts";
import type { FlowHead } from "./stages/flow-head.ts";
import type { FlowLm } from "./stages/flow-lm.ts";
import type { FlowLmStepper } from "./stages/flow-lm-slots.ts";
import type { FlowLmState } from "./stages/state.ts";
import type { LatentDecoder } from "./stages/mimi-decoder.ts";
import type { TextConditioner } from "./stages/text-conditioner.ts";
import { framesAfterEosGuessFor, splitIntoBestSentences, splitTokensWithinBudget } from "./text-prompt.ts";
import type { SentencePieceTokenizer } from "../../text/sentencepiece.ts";
import { type LatentNoise, seededLatentNoise } from "./noise.ts";
import { type LatentBatchDecoder, decodeAlongside } from "./decode-schedule.ts";

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


/** The stages generation needs (the voice encoder is only needed to make a voice state). */
export interface GenerationStages {
  textConditioner: TextConditioner;
  flowLm: FlowLm;
  /** AR steps through a slot of the batched step, as the runner does; absent or null: the published graph. */
  flowLmSlots?: FlowLmStepper | null;
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
  /** Seed of the default noise (an int64); default: a random one. */
  seed?: number | bigint;
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
    const slots = stages.flowLmSlots ?? null;
    const slot = slots?.admit(flowState);

    const step: ArStepFunction = async (inputLatent) => {
      let result: { conditioning: Float32Array; eosLogit: number };
      if (slots && slot) {
        [result] = (await slots.step([{ slot, latent: inputLatent }])) as [typeof result];
      } else {
        // flowState is this chunk's own (the prefill above copied the shared voice caches), so each step
        // may write into it.
        const stepped = await stages.flowLm.step(flowState, inputLatent, { reuseState: true });
        flowState = stepped.state;
        result = stepped;
      }
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
      if (slot) slots?.release(slot);
    }
  }
}
