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
  /**
   * Languages the model speaks, as BCP 47 tags (`en-US`, `fr`), every voice alike (an uploaded voice speaks
   * the model's languages): what the Wyoming server lists for Home Assistant to pick voices by. Text
   * normalization reads in the first.
   */
  languages: readonly string[];
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
  /** Aborted when the client goes away; the engine ends the request at its next tick. */
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
   * For a model that reads only some characters: the text as it reads it, and whether anything it could not
   * read (a letter of another script, an emoji) was dropped. The speech service asks before any audio, so a
   * request with nothing readable left is a 400 and a partial drop is named in X-Ignored-Fields. Absent: the
   * model reads any text.
   */
  readableText?(text: string): { text: string; dropped: boolean };
  /**
   * The `extra_params` the model reads, with their ranges. The speech service checks every request with it
   * before any work, so a bad value is a 400 naming `extra_params.<key>` and never a failure mid-stream;
   * job.extraParams is what it parsed.
   */
  readonly paramsSchema: z.ZodType<Record<string, unknown>>;
  /** Runs the engine's plans over this model's requests: the only way its audio is made. */
  readonly runner: ModelRunner;
  /**
   * The folder of the model's files (a Pocket bundle), which the server lends to pages that run the model
   * themselves (GET /v1/models/{model}/files); absent for a model with no files to lend (the offline engine).
   */
  readonly filesDirectory?: string;
  /**
   * Encodes reference audio into a voice prompt. Present exactly when capabilities.supportsCloning. Work that
   * must not run beside the engine's plans (the model's in-process sessions) goes through `runModelWork`,
   * which runs it between two ticks; work off the JS thread (a worker) may run at any time.
   */
  encodeVoice?(reference: ReferenceAudio, signal: AbortSignal, runModelWork: <T>(task: () => Promise<T>) => Promise<T>): Promise<VoicePrompt>;
  close(): Promise<void>;
}

// What a model's runner and the engine exchange each tick (src/engine/ plans, the runner executes). The
// types live here, not in src/engine/, because runners implement them and a model never imports the engine.

/** The engine's id of one request, unique for the engine's life. */
export type RequestId = number;

/** Why a request ended: the end of its speech, a frame cap, its client leaving, or a failure. */
export type FinishReason = "stop" | "length" | "abort" | "error";

/** What a request can do next, as its model sees it: the scheduler plans from this alone. */
export interface RequestWork {
  /** Cost, in positions, of the prefill unit the request needs before it can step (voice, next text chunk); 0: none. */
  prefillPositions: number;
  /** Whether the request can take one AR step now. */
  canStep: boolean;
  /** Frames sampled and due for decoding by the model's own schedule, ready for one call now; 0: none. */
  decodeFrames: number;
}

/** A request with nothing to do (finished, or unknown to its runner). */
export const NO_WORK: Readonly<RequestWork> = Object.freeze({ prefillPositions: 0, canStep: false, decodeFrames: 0 });

/** One tick's work, a plain value: the runner executes exactly this. */
export interface StepPlan {
  /** Requests seen for the first time: the runner makes their state (no model work yet) before anything else. */
  newRequests: ReadonlyArray<{ requestId: RequestId; job: SynthesisJob }>;
  /** Requests that run one prefill unit (voice load, a text chunk's conditioning and FlowLM prefill), oldest first. */
  prefills: readonly RequestId[];
  /** Requests that take one AR step, the one closest to running dry first. */
  steps: readonly RequestId[];
  /** Requests whose due frames are decoded, with how many; the runner may put equal counts into one call. */
  decodes: ReadonlyArray<{ requestId: RequestId; frames: number }>;
  /** Requests that ended since the last plan (finished, aborted, failed): the runner frees their state now, not at GC. */
  finishedRequestIds: readonly RequestId[];
}

/** What one tick did to one request the plan named. */
export interface RequestResult {
  requestId: RequestId;
  /** Audio made for the request this tick, in order (often none: a step makes a latent, a decode makes audio). */
  audio: AudioChunk[];
  /**
   * Set when the request has nothing more to make and every frame has been handed out in `audio`: "stop" at
   * the natural end of its speech, "length" when a frame cap cut it short.
   */
  finishReason?: "stop" | "length";
  /** Set when the request failed; the engine ends it with "error" and the runner frees it with the others. */
  error?: Error;
}

export interface StepOutput {
  /** One entry per request the plan advanced (new requests included), in any order. */
  results: RequestResult[];
  /** Wall seconds per stage this tick, for the tick-time metric: e.g. { prefill: 0.01, flow_lm: 0.04 }. */
  stageSeconds: Record<string, number>;
  /** Rows of each model call this tick, by stage, for the batch-size metric. */
  batchSizes: Record<string, number[]>;
}

/**
 * Executes plans over many requests. The engine calls `execute` with a plan of prefills and steps, and may
 * call it again with a plan of decodes only before the previous decode plan has settled (it overlaps a
 * tick's decode with the next tick's sampling); no request is in two plans of the same kind at once.
 */
export interface ModelRunner {
  /** Most requests the runner can hold at once (e.g. decoder state slots on a device); undefined: no limit of its own. */
  readonly maxRequests?: number;
  /**
   * Whether a decode plan runs off the JS thread (a worker, a GPU), so the engine may leave it in flight
   * while it samples the next tick; false or absent: decodes are awaited before the next tick.
   */
  readonly decodesOverlap?: boolean;
  /**
   * Whether several requests' decodes in one plan may share a model call (the WGSL decoder's equal-sized
   * decodes): then a tick's decodes go out as one plan. False or absent: each request's decode is a plan of its
   * own, so its audio is delivered the moment it is decoded rather than with the tick's slowest.
   */
  readonly decodesShareCalls?: boolean;
  /**
   * Frames of audio each AR step makes for its request (Pocket: 1, 80 ms): then a stream stays real time while
   * a tick is shorter than a frame, and the engine admits by its measured ticks (engine/capacity.ts). Absent:
   * steps make uneven audio (a classic sentence), and only `maxStreams` bounds admission.
   */
  readonly framesPerStep?: number;
  /** Most AR steps one tick should hold, when a step is long (a classic sentence); undefined: every running request. */
  readonly stepsPerTick?: number;
  execute(plan: StepPlan): Promise<StepOutput>;
  /**
   * What a request the runner knows can do next, asked when a tick is planned (never reported by a result:
   * a decode settling while a step runs would make a reported value stale); undefined for one it never saw.
   */
  nextWork(requestId: RequestId): RequestWork | undefined;
  /** Bytes of per-request model state held now (KV caches, decoder states, worker states). */
  stateBytes(): number;
  /**
   * Set once the runner can run nothing more (a worker that cannot be restarted, a lost device): the engine
   * then refuses new work, and readiness turns 503, rather than failing every request one by one.
   */
  readonly failure?: Error | undefined;
}
