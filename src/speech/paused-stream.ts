/**
 * An utterance cut by SSML breaks: its parts spoken one after another as engine requests, with the asked-for
 * silence between them, read as one stream. The first part is admitted as any request is (a full engine
 * refuses it); the parts after it wait for their place, as the utterance is already under way. The same seed
 * gives each part the same bytes, so the whole keeps "same seed, same bytes".
 */
import type { EngineStream } from "../engine/core.ts";
import type { AudioChunk, FinishReason, SynthesisJob } from "../models/contract.ts";

/** What the service reads audio from: one engine request, or the parts of a paused utterance. */
export interface SpeechAudio extends AsyncIterable<AudioChunk> {
  readonly requestId: number | string;
  readonly finishReason: FinishReason | undefined;
  cancel(): void;
}

export interface UtterancePart {
  /** Undefined for a pause with nothing before it (a break at the very start). */
  job: Omit<SynthesisJob, "signal"> | undefined;
  pauseAfterMs: number;
}

/** Silence goes out in pieces of this length, as a stream's frames do. */
const SILENCE_CHUNK_MS = 80;

export class PausedStream implements SpeechAudio {
  #current: EngineStream | undefined;
  #finishReason: FinishReason | undefined;
  #cancelled = false;

  constructor(
    private readonly parts: readonly UtterancePart[],
    /** The first speaking part, already admitted. */
    private readonly first: EngineStream | undefined,
    private readonly next: (job: Omit<SynthesisJob, "signal">) => Promise<EngineStream>,
    private readonly sampleRateHz: number,
  ) {
    this.#current = first;
  }

  get requestId(): number | string {
    return this.#current?.requestId ?? "pause";
  }

  get finishReason(): FinishReason | undefined {
    return this.#finishReason;
  }

  cancel(): void {
    this.#cancelled = true;
    this.#current?.cancel();
    this.#finishReason ??= "abort";
  }

  async *[Symbol.asyncIterator](): AsyncIterator<AudioChunk> {
    let firstUsed = false;
    let truncated = false;
    for (const part of this.parts) {
      if (this.#cancelled) return;
      if (part.job) {
        const stream = !firstUsed && this.first ? this.first : await this.next(part.job);
        firstUsed = true;
        this.#current = stream;
        for await (const chunk of stream) yield chunk;
        if (stream.finishReason !== "stop" && stream.finishReason !== "length") {
          this.#finishReason = stream.finishReason;
          return;
        }
        if (stream.finishReason === "length") truncated = true;
      }
      yield* this.#silence(part.pauseAfterMs);
    }
    this.#finishReason = truncated ? "length" : "stop";
  }

  *#silence(ms: number): Generator<AudioChunk> {
    let left = Math.round((ms * this.sampleRateHz) / 1000);
    const piece = Math.round((SILENCE_CHUNK_MS * this.sampleRateHz) / 1000);
    while (left > 0 && !this.#cancelled) {
      const length = Math.min(piece, left);
      yield { samples: new Float32Array(length), sampleRateHz: this.sampleRateHz, frameCount: 0 };
      left -= length;
    }
  }
}
