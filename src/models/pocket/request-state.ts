/**
 * One Pocket TTS request inside the runner: where its text chunks stand, its FlowLM state, its noise, the
 * EOS bookkeeping of the chunk it samples (docs/pocket-tts.md §2.2, the loop rule of loop.ts), and the
 * latents waiting for the Mimi decoder, chunk by chunk, with the decode schedule that makes the same bytes
 * for a seed whatever the load: batch sizes follow frame counts alone (1, 2, 4, … up to decodeBatchFrames,
 * decode-schedule.ts), never timing.
 */
import type { RequestWork, SynthesisJob } from "../contract.ts";
import { DEFAULT_GENERATION_PARAMS, maxFramesForTokens, type GenerationParams, type TextChunk } from "./loop.ts";
import { seededLatentNoise, type LatentNoise } from "./noise.ts";
import { decodeBatchFrames } from "./decode-schedule.ts";
import type { FlowLmState } from "./stages/state.ts";
import type { FlowLmSlot } from "./stages/flow-lm-slots.ts";

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
  decoderState: unknown;
  /** Sampled latents not yet sent to the decoder. */
  pending: Float32Array[];
  /** Frames sent to the decoder so far (the schedule's clock). */
  sentFrames: number;
  /** Sampling of this chunk has ended: what is pending is its last. */
  sampled: boolean;
}

export class PocketRequest {
  readonly params: GenerationParams;
  /** x0 of each AR step: the job's seed (a random one without), at the request's temperature. */
  readonly noise: LatentNoise;
  voice: FlowLmState | undefined;
  chunks: readonly TextChunk[] = [];
  /** Next chunk to prefill. */
  nextChunk = 0;
  sampling: SamplingChunk | undefined;
  /** Oldest first; the first is the one decoding now. */
  readonly decoding: DecodingChunk[] = [];
  /** A decode call for this request has not settled. */
  decodeInFlight = false;
  /** Every chunk has been sampled (or the frame cap was reached). */
  samplingDone = false;
  /** Some chunk hit its frame cap without EOS, or the job's max_new_tokens cut it: the answer is truncated. */
  truncated = false;
  framesSampled = 0;
  /** The engine has ended the request; what it holds is released as soon as no call uses it. */
  freed = false;

  constructor(
    readonly job: SynthesisJob,
    params: Partial<GenerationParams>,
  ) {
    this.params = { ...DEFAULT_GENERATION_PARAMS, ...params };
    this.noise = seededLatentNoise(job.seed ?? BigInt(Math.floor(Math.random() * 2 ** 32)), this.params.temperature);
  }

  get needsVoice(): boolean {
    return this.voice === undefined;
  }

  /** What the scheduler may plan for this request next. */
  work(): RequestWork {
    const needsPrefill = !this.samplingDone && this.sampling === undefined;
    const nextTokens = this.chunks[this.nextChunk]?.tokenIds.length ?? 0;
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
    this.sampling = {
      cache,
      step: 0,
      // Each AR step adds one cache position; stop before the static cache overflows (§6.10).
      maxFrames: Math.min(maxFramesForTokens(chunk.tokenIds.length), this.params.maxFramesPerChunk ?? Infinity, cachePositions - positions),
      framesAfterEos: this.params.framesAfterEos ?? chunk.framesAfterEos,
      eosStep: undefined,
      input: null,
    };
    this.decoding.push({ decoderState, pending: [], sentFrames: 0, sampled: false });
    this.nextChunk++;
    // A voice that leaves no room in the cache: the chunk has nothing to say.
    if (this.sampling.maxFrames <= 0) this.#endChunk();
  }

  /**
   * Applies one AR step's result by the loop rule: the step that reaches eosStep + framesAfterEos is run but
   * not emitted; a chunk also ends at its frame cap, and the request at the job's max_new_tokens.
   */
  applyStep(latent: Float32Array, eosLogit: number): void {
    const chunk = this.sampling!;
    const k = chunk.step;
    if (eosLogit > this.params.eosThreshold && chunk.eosStep === undefined) chunk.eosStep = k;
    if (chunk.eosStep !== undefined && k >= chunk.eosStep + chunk.framesAfterEos) return this.#endChunk();
    this.decoding.at(-1)!.pending.push(latent);
    this.framesSampled++;
    chunk.input = latent;
    chunk.step++;
    if (this.framesSampled >= (this.job.maxNewTokens ?? Infinity)) {
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
    if (this.nextChunk >= this.chunks.length) this.samplingDone = true;
  }
}
