/**
 * One Pocket TTS request inside the runner: where its text chunks stand, its FlowLM state, its noise, the
 * loop rule of the chunk it samples (docs/pocket-tts.md §2.2) and the latents waiting for the Mimi decoder,
 * chunk by chunk, with the decode schedule that makes the same bytes for a seed whatever the load: batch
 * sizes follow frame counts alone (1, 2, 4, … up to decodeBatchFrames), never timing.
 *
 * Per text chunk: start from the voice state (an immutable value, so "copy the voice state" costs nothing)
 * and prefill the chunk's text conditioning; AR steps k = 0 … maxFrames−1 feed BOS first, then the previous
 * latent; `eosStep` is the first k whose raw EOS logit exceeds the threshold, and the chunk stops *without
 * emitting* latent k once k ≥ eosStep + framesAfterEos. Emitted latents are decoded with a Mimi decoder
 * state fresh for every chunk (§6.13); chunks are concatenated without crossfade.
 */
import type { RequestWork } from "../contract.ts";
import { DEFAULT_GENERATION_PARAMS, type GenerationParams } from "./params.ts";
import { maxFramesForTokens, type TextChunk } from "./text-chunks.ts";
import { seededLatentNoise, type LatentNoise } from "./noise.ts";
import type { FlowLmState } from "./stages/state.ts";
import type { FlowLmSlot } from "./stages/flow-lm-slots.ts";

/** Every AR step as it happened, emitted or not (for conformance against golden runs). */
export interface StepTrace {
  chunkIndex: number;
  /** k within the chunk. */
  step: number;
  /** The sampled normalised latent [latentDim]. */
  latent: Float32Array;
  /** The raw EOS logit. */
  eosLogit: number;
  isEos: boolean;
  emitted: boolean;
}

/**
 * What one request generates. The engine's jobs come with a voice to load and text to plan (the runner makes
 * both at the request's first prefill); a caller's GenerationJob (runner.ts) gives them made.
 */
export interface Generation {
  /** FlowLM state after the voice prefill (§2.1), shared read-only by every chunk; or how to load it. */
  voice: FlowLmState | (() => Promise<FlowLmState>);
  /** The text chunks; or how to plan them once the voice says how much room it leaves in the cache. */
  chunks: readonly TextChunk[] | ((voice: FlowLmState) => readonly TextChunk[]);
  params?: Partial<GenerationParams>;
  /** x0 source; default: `seededLatentNoise(seed, temperature)`. */
  noise?: LatentNoise;
  /** Seed of the default noise (an int64); default: a random one. */
  seed?: number | bigint;
  /** Frames after which the request ends, truncated (a job's max_new_tokens); default: none. */
  maxTotalFrames?: number;
  /** Hears every AR step (StepTrace); absent, nothing is recorded. */
  onStep?: (trace: StepTrace) => void;
}

/**
 * The chunk being sampled, with its FlowLM caches: a slot of the batched step (stages/flow-lm-slots.ts),
 * or, where there is none, its own state (a copy of the voice's, written in place step by step).
 */
export interface SamplingChunk {
  cache: { slot: FlowLmSlot } | { state: FlowLmState };
  /** k within the chunk. */
  step: number;
  maxFrames: number;
  framesAfterEos: number;
  /** First k whose EOS logit passed the threshold. */
  eosStep: number | undefined;
  /** The latent emitted at k − 1 (null: BOS at k = 0). */
  input: Float32Array | null;
}

/** A chunk's latents on their way through its own Mimi decoder state (fresh for every chunk, §6.13). */
export interface DecodingChunk {
  /** Index of the chunk in the request's plan. */
  chunkIndex: number;
  decoderState: unknown;
  /** Sampled latents not yet sent to the decoder. */
  pending: Float32Array[];
  /** Frames sent to the decoder so far (the schedule's clock). */
  sentFrames: number;
  /** Sampling of this chunk has ended: what is pending is its last. */
  sampled: boolean;
}

/**
 * Latents the next decoder call of a chunk takes once `sentFrames` have been sent: 1, 2, 4, … up to
 * `maxBatchFrames`, so first audio leaves at once and later calls grow with what was sent, since one decoder
 * call on k latents costs far less than k calls (anchors: 18.9 → 6.2 ms/frame from 1 to 15 per call). A
 * function of counts alone, never of timing: a different split changes float rounding, and the same seed
 * must give the same bytes.
 */
export function decodeBatchFrames(sentFrames: number, maxBatchFrames: number): number {
  return Math.min(maxBatchFrames, sentFrames + 1);
}

export class PocketRequest {
  readonly params: GenerationParams;
  /** x0 of each AR step: the generation's noise, or its seed's (a random one without), at its temperature. */
  readonly noise: LatentNoise;
  voice: FlowLmState | undefined;
  /** Undefined until planned (at the first prefill, once the voice is known). */
  chunks: readonly TextChunk[] | undefined;
  /** Next chunk to prefill. */
  nextChunk = 0;
  sampling: SamplingChunk | undefined;
  /** Oldest first; the first is the one decoding now. */
  readonly decoding: DecodingChunk[] = [];
  /** A decode call for this request has not settled. */
  decodeInFlight = false;
  /** Every chunk has been sampled (or the frame cap was reached). */
  samplingDone = false;
  /** Some chunk hit its frame cap without EOS, or maxTotalFrames cut it: the answer is truncated. */
  truncated = false;
  framesSampled = 0;
  /** The engine has ended the request; what it holds is released as soon as no call uses it. */
  freed = false;

  constructor(readonly generation: Generation) {
    this.params = { ...DEFAULT_GENERATION_PARAMS, ...generation.params };
    this.noise = generation.noise ?? seededLatentNoise(generation.seed ?? BigInt(Math.floor(Math.random() * 2 ** 32)), this.params.temperature);
    if (typeof generation.voice !== "function") this.voice = generation.voice;
    if (typeof generation.chunks !== "function") this.chunks = generation.chunks;
  }

  get needsVoice(): boolean {
    return this.voice === undefined;
  }

  /** What the scheduler may plan for this request next. */
  work(): RequestWork {
    const needsPrefill = !this.samplingDone && this.sampling === undefined;
    const nextTokens = this.chunks?.[this.nextChunk]?.tokenIds.length ?? 0;
    return {
      // A voice still to load (and possibly prefill) costs about what a text chunk does.
      prefillPositions: needsPrefill ? Math.max(1, this.needsVoice ? 64 : nextTokens) : 0,
      canStep: this.sampling !== undefined,
      decodeFrames: this.decodeInFlight ? 0 : this.dueDecode()?.frames ?? 0,
    };
  }

  /** Nothing left to sample or decode. */
  get finished(): boolean {
    return this.samplingDone && this.decoding.length === 0 && !this.decodeInFlight;
  }

  /** Starts sampling the next chunk from its prefilled caches, which hold `positions` positions. */
  startChunk(cache: SamplingChunk["cache"], positions: number, chunk: TextChunk, cachePositions: number, decoderState: unknown): void {
    const framesAfterEos = this.params.framesAfterEos ?? chunk.framesAfterEos;
    if (!Number.isInteger(framesAfterEos) || framesAfterEos < 0) throw new RangeError(`frames_after_eos must be a non-negative integer, got ${framesAfterEos}`);
    this.sampling = {
      cache,
      step: 0,
      // Each AR step adds one cache position; stop before the static cache overflows (§6.10).
      maxFrames: Math.min(maxFramesForTokens(chunk.tokenIds.length), this.params.maxFramesPerChunk ?? Infinity, cachePositions - positions),
      framesAfterEos,
      eosStep: undefined,
      input: null,
    };
    this.decoding.push({ chunkIndex: this.nextChunk, decoderState, pending: [], sentFrames: 0, sampled: false });
    this.nextChunk++;
    // A voice that leaves no room in the cache: the chunk has nothing to say.
    if (this.sampling.maxFrames <= 0) this.#endChunk();
  }

  /**
   * Applies one AR step's result by the loop rule: the step that reaches eosStep + framesAfterEos is run but
   * not emitted (an EOS at step 0 counts: sherpa's `eos_step > 0` is not copied, §3.4); a chunk also ends at
   * its frame cap, and the request at maxTotalFrames.
   */
  applyStep(latent: Float32Array, eosLogit: number): void {
    const chunk = this.sampling!;
    const k = chunk.step;
    const isEos = eosLogit > this.params.eosThreshold;
    if (isEos && chunk.eosStep === undefined) chunk.eosStep = k;
    const stop = chunk.eosStep !== undefined && k >= chunk.eosStep + chunk.framesAfterEos;
    this.generation.onStep?.({ chunkIndex: this.decoding.at(-1)!.chunkIndex, step: k, latent, eosLogit, isEos, emitted: !stop });
    if (stop) return this.#endChunk();
    this.decoding.at(-1)!.pending.push(latent);
    this.framesSampled++;
    chunk.input = latent;
    chunk.step++;
    if (this.framesSampled >= (this.generation.maxTotalFrames ?? Infinity)) {
      this.truncated = true;
      this.samplingDone = true;
      return this.#endChunk();
    }
    if (chunk.step >= chunk.maxFrames) {
      // Cut before its end of speech came (after EOS, the cap only shortens the trailing frames).
      if (chunk.eosStep === undefined) this.truncated = true;
      this.#endChunk();
    }
  }

  /** The decode the schedule makes due now, from the oldest chunk with latents waiting. */
  dueDecode(): { chunk: DecodingChunk; frames: number } | undefined {
    const chunk = this.decoding[0];
    if (!chunk || chunk.pending.length === 0) return undefined;
    const batch = decodeBatchFrames(chunk.sentFrames, this.params.decodeBatchFrames);
    if (chunk.pending.length >= batch) return { chunk, frames: batch };
    return chunk.sampled ? { chunk, frames: chunk.pending.length } : undefined;
  }

  /** Decoding chunks whose every latent has been decoded: their decoder states can go. */
  takeDecodedChunks(): DecodingChunk[] {
    const done: DecodingChunk[] = [];
    while (this.decoding[0]?.sampled && this.decoding[0].pending.length === 0) done.push(this.decoding.shift()!);
    return done;
  }

  #endChunk(): void {
    this.sampling = undefined;
    this.decoding.at(-1)!.sampled = true;
    if (this.nextChunk >= this.chunks!.length) this.samplingDone = true;
  }
}
