/**
 * The seam between the speech service and a model. Everything above it (HTTP, SSE, WebSocket, batch)
 * talks only to this interface; every model (the offline classic engine, Pocket TTS) implements it.
 */

export interface AdapterCapabilities {
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
  /** Rate of the PCM the adapter yields. */
  nativeSampleRateHz: number;
  /** Output rates the service may resample to. */
  supportedSampleRatesHz: readonly number[];
  /** Whether the model can take reference audio (voice cloning). */
  supportsCloning: boolean;
  /** Whether the model uses the `instructions` field. */
  supportsInstructions: boolean;
  /** Whether the model can report word timings. */
  supportsWordTimestamps: boolean;
  /** Longest input, in characters. */
  maxInputChars: number;
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
  seed?: number;
  /** Cap on generated frames. */
  maxNewTokens?: number;
  /** Reference audio for cloning: mono float32 at nativeSampleRateHz. */
  refAudio?: Float32Array;
  refText?: string;
  instructions?: string;
  extraParams: Record<string, unknown>;
  /** Aborted when the client goes away; the adapter stops within one frame. */
  signal: AbortSignal;
}

export interface AudioChunk {
  /** Mono samples in [-1, 1]. */
  samples: Float32Array;
  sampleRateHz: number;
  /** Codec frames this chunk accounts for (usage). */
  frameCount: number;
}

export interface SpeechModelAdapter {
  readonly capabilities: AdapterCapabilities;
  /** Number of text tokens the model sees for this input (usage). */
  countInputTokens(text: string): number;
  /** Audio for the job as it is made. Stops promptly once job.signal aborts. */
  synthesize(job: SynthesisJob): AsyncGenerator<AudioChunk, void, undefined>;
  close(): Promise<void>;
}
