/**
 * The seam between the speech service and a model. Everything above it (HTTP, SSE, WebSocket, batch)
 * talks only to this interface; every model (the offline classic engine, Pocket TTS) implements it.
 */
import type { z } from "zod";

export interface ModelCapabilities {
  /** Id served in /v1/models and accepted in the `model` field. */
  modelId: string;
  /** "classic-fallback" engines have no neural weights; they are labelled so in /v1/models and logs. */
  kind: "classic-fallback" | "neural";
  /** Human-readable description, e.g. "eSpeak NG 1.52 (wasm), offline classic fallback". */
  description: string;
  /** Built-in voice names, lower-case. */
  voices: readonly string[];
  /** Voice used for `"default"` or when the request names none. */
  defaultVoice: string;
  /** Rate of the PCM the model yields; the speech service resamples it to the rate a request asks for. */
  nativeSampleRateHz: number;
  /** Whether the model can take reference audio (voice cloning). */
  supportsCloning: boolean;
  /** Whether the model uses the `instructions` field. */
  supportsInstructions: boolean;
  /** Whether the model can report word timings. */
  supportsWordTimestamps: boolean;
  /** Codec frames per second of audio; output usage tokens are frames. */
  framesPerSecond: number;
  /** Embedding sizes accepted for direct speaker-embedding uploads; empty = none. */
  speakerEmbeddingDims: readonly number[];
}

export interface SynthesisJob {
  text: string;
  /** A built-in voice name (lower-case). */
  voice: string;
  language: string;
  /** An int64 (any value the API accepts); a model that uses noise draws the same noise for the same seed. */
  seed?: bigint;
  /** Cap on generated frames. */
  maxNewTokens?: number;
  /** The voice to clone, made by encodeVoice (cached by the service per voice). */
  voicePrompt?: VoicePrompt;
  instructions?: string;
  /** The request's extra_params as the model's paramsSchema parsed them. */
  extraParams: Record<string, unknown>;
  /** Aborted when the client goes away; the adapter stops within one frame. */
  signal: AbortSignal;
}

/** Reference audio for cloning: mono samples at the adapter's native rate, with its transcript if known. */
export interface ReferenceAudio {
  samples: Float32Array;
  sampleRateHz: number;
  transcript?: string;
}

/** Model-side state of a cloned voice (e.g. an encoded prompt): opaque to the service, costly to make. */
export interface VoicePrompt {
  /** Codec frames of the reference audio (usage: input audio tokens). */
  audioFrameCount: number;
  /** Byte size, for cache accounting. */
  byteSize: number;
  readonly state: unknown;
}

export interface AudioChunk {
  /** Mono samples in [-1, 1]. */
  samples: Float32Array;
  sampleRateHz: number;
  /** Codec frames this chunk accounts for (usage). */
  frameCount: number;
}

export interface SpeechModel {
  readonly capabilities: ModelCapabilities;
  /** Number of text tokens the model sees for this input (usage). */
  countInputTokens(text: string): number;
  /**
   * The `extra_params` the model reads, with their ranges. The speech service checks every request with it
   * before any work, so a bad value is a 400 naming `extra_params.<key>` and never a failure mid-stream;
   * job.extraParams is what it parsed.
   */
  readonly paramsSchema: z.ZodType<Record<string, unknown>>;
  /** Audio for the job as it is made. Stops promptly once job.signal aborts. */
  synthesize(job: SynthesisJob): AsyncGenerator<AudioChunk, void, undefined>;
  /** Encodes reference audio into a voice prompt. Present exactly when capabilities.supportsCloning. */
  encodeVoice?(reference: ReferenceAudio, signal: AbortSignal): Promise<VoicePrompt>;
  close(): Promise<void>;
}
