/**
 * Request → job: checks what depends on configuration and on the loaded model (voice, model name, rates,
 * lengths, cloning), then drives the engine and shapes its audio for delivery (resample, speed, encode).
 * A route makes one call, `start`, and frames what it gets: the audio in its response format, and how the
 * generation ended.
 */
import { wyomingExposure, type Config } from "../config.ts";
import { LRUCache } from "lru-cache";
import { createHash } from "node:crypto";
import { Semaphore } from "../async/semaphore.ts";
import type { ModelCapabilities, SpeechModel, SynthesisJob, VoicePrompt } from "../models/contract.ts";
import type { ModelHost } from "../engine/host.ts";
import type { Engine, EngineStream } from "../engine/core.ts";
import { STREAM_OUTCOMES } from "../engine/request.ts";
import type { FinishReason } from "../models/contract.ts";
import { silentLogger, type Logger } from "../log/logger.ts";
import { ApiError, badRequest, echoed } from "../api/errors.ts";
import type { SpeechRequest } from "../api/speech.ts";
import { samplingParamsSchema } from "../api/sampling-params.ts";
import { DEFAULT_MAX_INPUT_CHARS, MAX_VOICE_NAME_CHARS, OTHER_MODELS_FIELDS, VLLM_SAMPLING_FIELDS } from "../api/speech.ts";
import type { DeliveryMode, ServiceMetrics } from "../metrics.ts";
import { renderAudioFile, type EncodingOptions, type ResponseFormat } from "../audio/encoders.ts";
import { G711_SAMPLE_RATE_HZ } from "../audio/g711.ts";
import { createStreamEncoder } from "../audio/stream-encoder.ts";
import { createStreamingResampler } from "../audio/resampler.ts";
import { concatBytes, concatFloat32 } from "../lib/concat.ts";
import { resample } from "../audio/resampler.ts";
import type { StoredVoice, VoiceStore } from "../voices/store.ts";
import type { RefAudioResolver } from "../voices/ref-audio.ts";
import { voiceAliasTarget, type VoiceAliasTable } from "../api/voice-aliases.ts";
import { spokenText } from "./text-normalization.ts";

/** The output rates a request may ask for, whatever the model's own rate: the service resamples. */
export const OUTPUT_SAMPLE_RATES_HZ: readonly number[] = [8000, 16000, 22050, 24000, 44100, 48000];
/** The rate of OpenAI's `pcm` response format (16-bit little-endian mono at 24 kHz). */
export const OPENAI_PCM_SAMPLE_RATE_HZ = 24000;

/**
 * The speech models the `openai` SDK types (`SpeechModel`), answered by the served model: a client that
 * picks any of them works unchanged. Listed by /v1/models; later dated snapshots are accepted by pattern.
 */
export const OPENAI_SPEECH_MODELS: readonly string[] = ["tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15"];
const OPENAI_DATED_SPEECH_MODEL = /^(?:gpt-4o-mini-tts|gpt-4o-tts|tts-1|tts-1-hd)-\d{4}-\d{2}-\d{2}$/;

/** Encoded voice prompts kept in memory, at most this many. */
const VOICE_PROMPT_CACHE_ENTRIES = 64;
/**
 * And at most this many bytes of them: a prompt is a model state, 6–10 MiB for a 5–10 s clip on the real-size
 * Pocket bundle, so 64 of them could take 600 MiB of a 1 GiB container; this keeps the 6–10 voices used last.
 */
export const VOICE_PROMPT_CACHE_BYTES = 64 * 1024 ** 2;

/**
 * Longest audio one request may generate, from its input length: 10 s plus 1 s per character. Speech runs at
 * about 15 characters a second and the slowest text (digits, symbols read as words) at about 2, so this
 * never cuts speech short; it ends a generation whose end of speech never comes.
 */
function maxFramesForInput(inputChars: number, framesPerSecond: number): number {
  return Math.ceil(framesPerSecond * (10 + inputChars));
}

/** Names an unknown-voice error lists; the rest are only counted (GET /v1/audio/voices lists them all). */
const LISTED_VOICE_NAMES = 10;

/**
 * What a request arrived through, which decides what it may ask for and how its audio leaves: the speech
 * route (a file, a raw stream or SSE, as the request asks), a batch item, a WebSocket sentence sent whole
 * (one binary message) or streamed (stream_audio), or a Wyoming synthesis (raw pcm16 streamed as it is made).
 */
export type Transport = "http" | "batch" | "websocket_whole" | "websocket_streamed" | "wyoming";

export interface PreparedSpeech {
  job: Omit<SynthesisJob, "signal">;
  responseFormat: ResponseFormat;
  outputSampleRateHz: number;
  /** What the route asks of the codec beyond the format (a bitrate); empty for the OpenAI routes. */
  encoding: EncodingOptions;
  speed: number;
  /** How the audio leaves: what the route frames, and the mode the metrics count it under. */
  delivery: DeliveryMode;
  /** The audio leaves piece by piece as it is made (audio_stream, sse, a streamed WebSocket sentence), not as one file. */
  streamed: boolean;
  inputTextTokens: number;
  inputAudioTokens: number;
  /** Fields of the request the served model cannot use, so it ignored them (`extra_params.<key>` for its params). */
  ignoredFields: string[];
}

export interface SpeechUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  input_token_details: { text_tokens: number; audio_tokens: number };
}

/** Counts what a generation produced, filled in as audio flows. */
interface GenerationTally {
  frames: number;
  /** Samples at the output rate, before the speed change. */
  samples: number;
}

/** A request under way: what `start` returns. */
export interface StartedSpeech {
  prepared: PreparedSpeech;
  /**
   * The audio in `prepared.responseFormat`. A file (a file, a batch item, a whole WebSocket sentence) comes
   * as one piece once it is made; a stream comes piece by piece as the format can give them
   * (audio/stream-encoder.ts), and the joined pieces are one file. Reading it runs the generation; leaving
   * early (`return`, `break`) gives the generation up. A file whose client left throws a 499.
   */
  audio: AsyncGenerator<Uint8Array, void, undefined>;
  /** Settles (never rejects) once `audio` has ended, however it ended. */
  done: Promise<SpeechEnd>;
}

export interface SpeechEnd {
  /** "stop" (the speech ended by itself), "length" (a frame cap cut it), "abort" (the client left) or "error". */
  finishReason: FinishReason;
  usage: SpeechUsage;
  /** Seconds of audio delivered, after the speed change. */
  audioSeconds: number;
}

export class SpeechService {
  /**
   * Prompts of uploaded voices, keyed by lower-case name, created_at and transcript (a request's ref_text
   * overrides the stored one): a delete + re-upload gets a new created_at, so a stale prompt can never be
   * served even before the eviction below runs.
   */
  readonly #voicePrompts = new LRUCache<string, { prompt: Promise<VoicePrompt> }>({ max: VOICE_PROMPT_CACHE_ENTRIES, maxSize: VOICE_PROMPT_CACHE_BYTES });
  /**
   * One voice encode at a time: on two cores a second would only halve the speed of both, and take a core
   * from the playing streams. Others wait, as many as the engine runs streams; past that a 429.
   */
  readonly #encodeGate = new Semaphore(1);
  #encodesWaiting = 0;
  /**
   * Files whose audio is made and which the encoder workers have not finished: each holds its samples until
   * then. A file request is refused (429) while as many are encoding as the engine runs streams, so a burst of
   * long files waits in clients' retries, not in memory; a batch item waits for the engine, a few at a time.
   */
  #filesEncoding = 0;

  constructor(
    private readonly host: ModelHost,
    private readonly config: Config,
    private readonly metrics: ServiceMetrics,
    private readonly voices: VoiceStore,
    private readonly refAudio: RefAudioResolver,
    private readonly logger: Logger = silentLogger,
  ) {
    voices.onEvict((nameLower) => {
      for (const key of this.#voicePrompts.keys()) if (key.startsWith(`${nameLower}\u0000`)) this.#voicePrompts.delete(key);
    });
  }

  get cachedVoicePrompts(): number {
    return this.#voicePrompts.size;
  }

  /** Bytes of the cached voice prompts (one byte for each still being encoded). */
  get cachedVoicePromptBytes(): number {
    return this.#voicePrompts.calculatedSize;
  }

  /** --voice-aliases, for the routes that list each alias beside the voices. */
  get voiceAliases(): VoiceAliasTable {
    return this.config.voiceAliases;
  }

  /** --max-input-chars: the longest text one request, batch item or WebSocket segment may speak. */
  get maxInputChars(): number {
    return this.config.maxInputChars;
  }

  /** The ready adapter, or 503 while loading / after a failed load. */
  model(): SpeechModel {
    const adapter = this.host.model;
    if (adapter) return adapter;
    if (this.host.state === "failed") throw new ApiError(503, `The speech model failed to load: ${this.host.failure?.message}`);
    throw new ApiError(503, "The speech model is still loading; retry shortly");
  }

  /** The engine that runs the ready model, or 503 as `model()`. */
  engine(): Engine {
    this.model();
    return this.host.engine!;
  }

  servedModelIds(): string[] {
    const capabilities = this.model().capabilities;
    return [...new Set([capabilities.modelId, ...OPENAI_SPEECH_MODELS, ...this.config.modelAliases])];
  }

  checkModel(model: string | undefined): void {
    if (model === undefined) return;
    if (!this.servedModelIds().includes(model) && !OPENAI_DATED_SPEECH_MODEL.test(model)) {
      throw new ApiError(404, `The model '${echoed(model)}' does not exist. Served: ${this.servedModelIds().join(", ")}`, "model");
    }
  }

  /** Validates everything the schema could not know and builds the job. Throws ApiError 4xx. */
  async prepare(request: SpeechRequest, transport: Transport, signal: AbortSignal, encoding: EncodingOptions = {}): Promise<PreparedSpeech> {
    const adapter = this.model();
    const capabilities = adapter.capabilities;
    this.checkModel(request.model);

    const text = request.input.trim();
    const { maxInputChars } = this.config;
    if (text.length > maxInputChars) throw badRequest(`input must be at most ${maxInputChars} characters (got ${text.length})`, "input");

    // A streamed WebSocket sentence is pcm16 unless the config names a format (the seed's behaviour, which clients rely on).
    const responseFormat = request.response_format ?? (transport === "websocket_streamed" ? "pcm" : "wav");
    // Raw pcm carries no rate, and OpenAI's is 24 kHz: clients such as Pipecat that ask for pcm play it at
    // 24 kHz whatever the model's own rate. Every other format says its rate, so it keeps the model's, and
    // so does the WebSocket's pcm16 by default.
    const outputSampleRateHz = request.sample_rate ?? (request.response_format === "pcm" ? OPENAI_PCM_SAMPLE_RATE_HZ : isG711(responseFormat) ? G711_SAMPLE_RATE_HZ : capabilities.nativeSampleRateHz);
    if (isG711(responseFormat) && outputSampleRateHz !== G711_SAMPLE_RATE_HZ) {
      throw badRequest(`response_format ${responseFormat} is G.711, which is 8000 Hz; omit sample_rate or set it to 8000`, "sample_rate");
    }
    if (!OUTPUT_SAMPLE_RATES_HZ.includes(outputSampleRateHz)) {
      throw badRequest(`sample_rate ${outputSampleRateHz} is not supported; supported: ${OUTPUT_SAMPLE_RATES_HZ.join(", ")}`, "sample_rate");
    }

    const instructions = request.instructions?.trim() || undefined;
    if (instructions !== undefined) {
      if (instructions.length > this.config.maxInstructionsChars) {
        throw badRequest(`instructions must be at most ${this.config.maxInstructionsChars} characters`, "instructions");
      }
    }

    if (request.ref_audio !== undefined && !capabilities.supportsCloning) {
      throw badRequest(`model '${capabilities.modelId}' (${capabilities.description}) cannot clone voices from ref_audio; use one of the built-in voices`, "ref_audio");
    }

    const streaming = streamingMode(request);
    if (transport !== "http" && streaming !== null) throw badRequest("stream and stream_format are not accepted here", request.stream_format !== undefined ? "stream_format" : "stream");
    const delivery = deliveryOf(transport, streaming);
    const streamed = streaming !== null || transport === "websocket_streamed" || transport === "wyoming";
    const speed = request.speed ?? 1;
    if (streamed) checkStreamable(speed, transport === "http" ? "stream" : "stream_audio");
    // A file (or a batch result) holds the whole utterance in memory until it is encoded: past the default
    // cap that is hundreds of MB, so long-form text, allowed by a raised --max-input-chars, must be streamed.
    if ((delivery === "file" || delivery === "batch") && text.length > DEFAULT_MAX_INPUT_CHARS) {
      throw badRequest(
        `input longer than ${DEFAULT_MAX_INPUT_CHARS} characters must be streamed (stream_format "audio" or "sse", or the WebSocket route): a file response holds the whole utterance in memory`,
        "input",
      );
    }
    if (request.word_timestamps && delivery !== "websocket") {
      throw badRequest("word_timestamps are only available on the WebSocket route", "word_timestamps");
    }
    // vLLM's top-level temperature is the model's sampling temperature, unless extra_params names one.
    const temperature = request.temperature !== undefined && request.extra_params?.temperature === undefined ? { temperature: request.temperature } : {};
    const extraParams = this.parseExtraParams({ ...temperature, ...(request.extra_params ?? {}) });
    // Limits above are on the text as sent; the model reads, and usage counts, its normalized form, less
    // what the model cannot read.
    const readable = readableText(adapter, spokenText(text, request.apply_text_normalization, capabilities));
    const ignoredFields = [
      // Part of the input was not read (a script the model does not speak).
      ...(readable.dropped ? ["input"] : []),
      ...(instructions !== undefined && !capabilities.supportsInstructions ? ["instructions"] : []),
      // No model here reads a language; "Auto", letting the model decide, is what each of them does.
      ...(request.language !== undefined && request.language.trim().toLowerCase() !== "auto" ? ["language"] : []),
      ...OTHER_MODELS_FIELDS.filter((field) => request[field] !== undefined),
      ...(request.temperature !== undefined && (request.extra_params?.temperature !== undefined || !Object.hasOwn(extraParams, "temperature")) ? ["temperature"] : []),
      ...VLLM_SAMPLING_FIELDS.filter((field) => request[field] !== undefined),
      // Only the first reference conditions the voice.
      ...(request.references ?? []).slice(1).map((_, index) => `references.${index + 1}`),
      ...Object.keys(request.extra_params ?? {})
        .filter((key) => !Object.hasOwn(extraParams, key))
        .map((key) => `extra_params.${headerSafeFieldName(key)}`),
    ].slice(0, MAX_IGNORED_FIELDS);

    const modelText = readable.text;
    // Wyoming has no authentication: uploads are off it unless the configuration serves them there (config.ts).
    const uploadsServed = transport !== "wyoming" || wyomingExposure(this.config).uploadedVoices;
    const { voice, voicePrompt } = await this.#resolveVoice(request, adapter, signal, uploadsServed);
    return {
      job: {
        text: modelText,
        voice,
        language: request.language ?? "Auto",
        seed: request.seed,
        // From the text as sent: its allowance of a second per character already covers written forms read out
        // in full, and normalized text cannot then make a file longer than the same input did before.
        maxNewTokens: Math.min(request.max_new_tokens ?? Infinity, maxFramesForInput(text.length, capabilities.framesPerSecond)),
        voicePrompt,
        instructions: capabilities.supportsInstructions ? instructions : undefined,
        extraParams,
      },
      responseFormat,
      outputSampleRateHz,
      encoding,
      speed,
      delivery,
      streamed,
      inputTextTokens: adapter.countInputTokens(modelText),
      inputAudioTokens: voicePrompt?.audioFrameCount ?? 0,
      ignoredFields,
    };
  }

  /** extra_params as the served model's schema reads them, or a 400 naming `extra_params.<key>`. */
  parseExtraParams(extraParams: Record<string, unknown>): Record<string, unknown> {
    // Sampling values outside every model's range are refused whichever model serves, even one that would
    // ignore the key: a client asking for endless generation learns it now, not from the next model.
    const sampling = samplingParamsSchema.safeParse(extraParams);
    const parsed = sampling.success ? this.model().paramsSchema.safeParse(extraParams) : sampling;
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0]!;
    const key = echoed(issue.path.map(String).join("."));
    const param = key ? `extra_params.${key}` : "extra_params";
    // A model words its messages after its own keys ("lsd_steps must be …"); the client sent them in extra_params.
    throw badRequest(key && issue.message.startsWith(key) ? `extra_params.${issue.message}` : `${param}: ${issue.message}`, param);
  }

  /**
   * `ref_audio` wins over `voice`. A name is then, in order: an uploaded voice the model can speak (it
   * shadows a built-in voice of the same name, and one named "default" is what "default" means, as in the
   * seed), a built-in voice, "default" (the model's default voice), an uploaded voice the model cannot speak
   * (a 400 that says why), or an alias (--voice-aliases, OpenAI's names, ElevenLabs' premade ids and names),
   * which speaks with the voice the alias table gives.
   */
  async #resolveVoice(request: SpeechRequest, adapter: SpeechModel, signal: AbortSignal, uploadsServed: boolean): Promise<{ voice: string; voicePrompt?: VoicePrompt }> {
    const capabilities = adapter.capabilities;
    if (request.ref_audio !== undefined) {
      const samples = await this.refAudio.resolve(request.ref_audio, capabilities.nativeSampleRateHz, signal);
      const transcript = request.ref_text?.trim() || undefined;
      // Keyed by content: the items of a batch, a WebSocket session's sentences and repeat callers that send
      // the same clip (by any URL or data: spelling) share one encode.
      const key = `\u0000ref\u0000${createHash("sha256").update(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength)).digest("base64")}\u0000${transcript ?? ""}`;
      const voicePrompt = await this.#sharedPrompt(key, signal, () => this.#encodeVoice(adapter, { samples, sampleRateHz: capabilities.nativeSampleRateHz, transcript }, new AbortController().signal));
      return { voice: capabilities.defaultVoice, voicePrompt };
    }
    const requested = (typeof request.voice === "object" ? request.voice.id : request.voice)?.trim().toLowerCase() || "default";
    // Replicas share the speaker folder: the name (and an alias's target) as the folder holds it now.
    await this.voices.refreshName(requested);
    const aliasTarget = voiceAliasTarget(this.config.voiceAliases, requested);
    if (aliasTarget !== undefined) await this.voices.refreshName(aliasTarget);
    const named = this.#lookUpVoice(requested, capabilities, uploadsServed) ?? this.#lookUpVoiceAlias(requested, capabilities, uploadsServed);
    if (named === undefined) {
      if (capabilities.voices.length === 0 && (!uploadsServed || this.voices.list().length === 0)) throw badRequest(`Unknown voice '${requested}'. ${noVoicesHint(capabilities)}`, "voice");
      throw badRequest(`Unknown voice '${requested}'. Accepted: ${this.#someVoiceNames(capabilities.voices, uploadsServed)}`, "voice");
    }
    if ("builtIn" in named) {
      if (request.ref_text !== undefined) throw badRequest(`ref_text is the transcript of ref_audio or of an uploaded voice, and voice '${requested}' is built in`, "ref_text");
      return { voice: named.builtIn };
    }
    const { uploaded } = named;
    if (!capabilities.supportsCloning) {
      throw badRequest(`voice '${uploaded.name}' is an uploaded voice, and model '${capabilities.modelId}' (${capabilities.description}) cannot clone voices; use a built-in voice`, "voice");
    }
    if (uploaded.embedding_source === "direct") {
      throw badRequest(`voice '${uploaded.name}' is a speaker embedding, which model '${capabilities.modelId}' cannot use; upload audio instead`, "voice");
    }
    // As the seed: a blank ref_text leaves the stored transcript in place.
    const transcript = request.ref_text?.trim() || uploaded.ref_text;
    return { voice: capabilities.defaultVoice, voicePrompt: await this.#uploadedVoicePrompt(uploaded, transcript, adapter, signal) };
  }

  /** What a lower-case voice name means to this model, aliases aside; undefined when nothing has the name. */
  #lookUpVoice(name: string, capabilities: ModelCapabilities, uploadsServed: boolean): NamedVoice | undefined {
    const uploaded = uploadsServed ? this.voices.get(name) : undefined;
    // An upload the model cannot speak must not take the name from a built-in voice that works.
    if (uploaded && canSpeakUpload(uploaded, capabilities)) return { uploaded };
    if (capabilities.voices.includes(name)) return { builtIn: name };
    if (name === "default") return { builtIn: defaultBuiltInVoice(capabilities) };
    return uploaded && { uploaded };
  }

  #lookUpVoiceAlias(name: string, capabilities: ModelCapabilities, uploadsServed: boolean): NamedVoice | undefined {
    const target = voiceAliasTarget(this.config.voiceAliases, name);
    if (target === undefined) return undefined;
    const named = this.#lookUpVoice(target, capabilities, uploadsServed);
    if (named) return named;
    // An alias of an upload names nothing where uploads are not served (Wyoming with API keys): an unknown voice.
    if (!uploadsServed && this.voices.get(target)) return undefined;
    // The client asked for a name the server promises to accept; the table, not the request, is wrong.
    throw new ApiError(500, `voice '${name}' is mapped to '${target}' by --voice-aliases, and model '${capabilities.modelId}' has no voice '${target}'; fix --voice-aliases`, "voice");
  }

  /** The first few accepted names and a count of the rest: the message stays short with a thousand voices. */
  #someVoiceNames(builtIn: readonly string[], uploadsServed: boolean): string {
    const uploaded = uploadsServed ? this.voices.list() : [];
    const total = (builtIn.length > 0 ? 1 : 0) + builtIn.length + uploaded.length;
    const listed = [...(builtIn.length > 0 ? ["default"] : []), ...builtIn, ...uploaded.slice(0, LISTED_VOICE_NAMES).map((voice) => voice.name)].slice(0, LISTED_VOICE_NAMES);
    // Voices restored from an older folder may carry names longer than uploads now allow.
    const shown = listed.map((name) => (name.length > MAX_VOICE_NAME_CHARS ? `${name.slice(0, MAX_VOICE_NAME_CHARS)}…` : name)).join(", ");
    return total > listed.length ? `${shown} … and ${total - listed.length} more (GET /v1/audio/voices lists them all)` : shown;
  }

  #uploadedVoicePrompt(voice: StoredVoice, transcript: string | undefined, adapter: SpeechModel, signal: AbortSignal): Promise<VoicePrompt> {
    const key = `${voice.name.toLowerCase()}\u0000${voice.created_at}\u0000${transcript ?? ""}`;
    const rateHz = adapter.capabilities.nativeSampleRateHz;
    return this.#sharedPrompt(key, signal, async () => {
      const stored = await this.voices.loadAudio(voice.name);
      if (!stored || stored.voice.created_at !== voice.created_at) throw badRequest(`voice '${voice.name}' was replaced or deleted; retry`, "voice");
      const samples = await resample(stored.samples, stored.sampleRateHz, rateHz);
      return this.#encodeVoice(adapter, { samples, sampleRateHz: rateHz, transcript }, new AbortController().signal);
    });
  }

  /**
   * The cached prompt under `key`, or the one `encode` makes, shared with every caller that asks meanwhile.
   * Encoding is not tied to the first caller's signal, since later callers wait for it too; a failed encode
   * (a 429 included) is not kept.
   */
  #sharedPrompt(key: string, signal: AbortSignal, encode: () => Promise<VoicePrompt>): Promise<VoicePrompt> {
    let prompt = this.#voicePrompts.get(key)?.prompt;
    if (!prompt) {
      prompt = encode();
      // Its size is known once encoded; until then it counts a byte. (A new entry object, since the cache
      // keeps the old size when the same value is set again.)
      this.#voicePrompts.set(key, { prompt }, { size: 1 });
      const made = prompt;
      made.then(
        (value) => {
          if (this.#voicePrompts.peek(key)?.prompt === made) this.#voicePrompts.set(key, { prompt: made }, { size: Math.max(1, value.byteSize) });
        },
        () => {
          if (this.#voicePrompts.peek(key)?.prompt === made) this.#voicePrompts.delete(key);
        },
      );
    }
    return prompt.then((value) => {
      if (signal.aborted) throw signal.reason;
      return value;
    });
  }

  /**
   * A voice encode counts in admission: with no room in the engine, or more encodes waiting than the engine
   * runs streams, it is a 429 before any work. Its model work runs between two engine ticks; the encoder
   * itself, where the model has it in a worker, off the JS thread.
   */
  async #encodeVoice(adapter: SpeechModel, reference: Parameters<NonNullable<SpeechModel["encodeVoice"]>>[0], signal: AbortSignal): Promise<VoicePrompt> {
    const encodeVoice = adapter.encodeVoice?.bind(adapter);
    if (!encodeVoice) throw new Error(`adapter ${adapter.capabilities.modelId} claims cloning but has no encodeVoice`);
    const engine = this.engine();
    engine.refuseIfFull();
    if (this.#encodesWaiting >= engine.limits.maxStreams) throw engine.fullError();
    this.#encodesWaiting++;
    let release: () => void;
    try {
      release = await this.#encodeGate.acquire();
    } finally {
      this.#encodesWaiting--;
    }
    try {
      return await encodeVoice(reference, signal, (task) => engine.runTask(task, signal));
    } finally {
      release();
    }
  }

  /**
   * One request, from its checks to its audio: `prepare`, then admission to the engine, then the audio as
   * `prepared.delivery` wants it. Where a refusal can still be a status line (the speech route, a batch item)
   * the job is admitted before this returns, so a full engine is a 429 and not a broken stream, and a batch
   * item waits for a place instead; a WebSocket sentence is admitted when its audio is first read, after its
   * audio.start, and refused by an error message. `onAudio` hears the seconds of each chunk as delivered
   * (after the speed change); when it throws, generation stops and `audio` throws that error. A client that
   * left before its audio was ready (`signal` aborted) is a 499, whatever the step it left at.
   */
  async start(request: SpeechRequest, transport: Transport, signal: AbortSignal, onAudio?: (seconds: number) => void, encoding: EncodingOptions = {}): Promise<StartedSpeech> {
    const sentence = transport === "websocket_whole" || transport === "websocket_streamed";
    try {
      const prepared = await this.prepare(request, transport, signal, encoding);
      const admitted = sentence ? undefined : await this.#admit(prepared, signal);
      let settle!: (end: SpeechEnd) => void;
      const done = new Promise<SpeechEnd>((resolve) => (settle = resolve));
      return { prepared, audio: this.#deliver(prepared, admitted, signal, settle, onAudio), done };
    } catch (error) {
      // A sentence is a stream of its session, counted however it ends; a request refused before its
      // response starts is no stream.
      if (sentence) this.metrics.countStreamEnd("websocket", STREAM_OUTCOMES[signal.aborted ? "abort" : "error"]);
      throw signal.aborted ? clientLeft() : error;
    }
  }

  #usage(prepared: PreparedSpeech, frames: number): SpeechUsage {
    const inputTokens = prepared.inputTextTokens + prepared.inputAudioTokens;
    return {
      input_tokens: inputTokens,
      output_tokens: frames,
      total_tokens: inputTokens + frames,
      input_token_details: { text_tokens: prepared.inputTextTokens, audio_tokens: prepared.inputAudioTokens },
    };
  }

  #admit(prepared: PreparedSpeech, signal: AbortSignal): Promise<EngineStream> {
    const engine = this.engine();
    if (prepared.delivery === "file" && this.#filesEncoding >= engine.limits.maxStreams) throw engine.fullError();
    return engine.submit({ ...prepared.job, signal }, { whenFull: prepared.delivery === "batch" ? "wait" : "reject" });
  }

  /**
   * The audio of `start`, and the one place a generation's end is told: its finish reason (the engine's, or
   * "abort" when the client left or its reader let go, "error" when it failed), the stream count derived
   * from it, and `done`.
   */
  async *#deliver(prepared: PreparedSpeech, admitted: EngineStream | undefined, signal: AbortSignal, settle: (end: SpeechEnd) => void, onAudio: ((seconds: number) => void) | undefined): AsyncGenerator<Uint8Array, void, undefined> {
    const tally: GenerationTally = { frames: 0, samples: 0 };
    let finishReason: FinishReason = "abort";
    let stream = admitted;
    let fileSeconds: number | undefined;
    try {
      stream ??= await this.#admit(prepared, signal);
      const pcm = this.#pcm(prepared, stream, signal, tally, onAudio);
      if (prepared.streamed) yield* encodedStream(prepared, pcm, signal);
      else {
        const file = await this.#encodedFile(prepared, pcm, signal);
        fileSeconds = file.seconds;
        yield file.bytes;
      }
      if (!signal.aborted) finishReason = stream.finishReason ?? "abort";
    } catch (error) {
      finishReason = signal.aborted ? "abort" : "error";
      throw error;
    } finally {
      // Read to its end, the request has already left the engine; otherwise (an encoder that failed before
      // reading, a reader that let go) it is given up here, not left holding its place.
      stream?.cancel();
      if (prepared.delivery !== "file" && prepared.delivery !== "batch") this.metrics.countStreamEnd(prepared.delivery, STREAM_OUTCOMES[finishReason]);
      settle({ finishReason, usage: this.#usage(prepared, tally.frames), audioSeconds: fileSeconds ?? tally.samples / prepared.outputSampleRateHz });
    }
  }

  /**
   * Mono float PCM at the requested output rate, chunk by chunk as the engine makes it. The resampler is
   * streaming, so chunk borders leave no seams. Stops when `signal` aborts.
   */
  async *#pcm(prepared: PreparedSpeech, stream: EngineStream, signal: AbortSignal, tally: GenerationTally, onAudio: ((seconds: number) => void) | undefined): AsyncGenerator<Float32Array, void, undefined> {
    const mode = prepared.delivery;
    const startedMs = performance.now();
    let resampler: Awaited<ReturnType<typeof createStreamingResampler>> | undefined;
    let firstAudioSeen = false;
    const emit = (samples: Float32Array) => {
      tally.samples += samples.length;
      if (!firstAudioSeen && samples.length > 0) {
        firstAudioSeen = true;
        this.metrics.timeToFirstAudio.observe({ mode }, (performance.now() - startedMs) / 1000);
      }
      onAudio?.(samples.length / prepared.outputSampleRateHz / prepared.speed);
      return samples;
    };
    try {
      for await (const chunk of stream) {
        tally.frames += chunk.frameCount;
        resampler ??= await createStreamingResampler(chunk.sampleRateHz, prepared.outputSampleRateHz);
        const resampled = resampler.push(chunk.samples);
        if (resampled.length > 0) yield emit(resampled);
        if (signal.aborted) return;
      }
      const tail = resampler?.flush();
      if (tail && tail.length > 0) yield emit(tail);
      const audioSeconds = tally.samples / prepared.outputSampleRateHz;
      if (audioSeconds > 0) {
        this.metrics.realTimeFactor.observe({ mode }, (performance.now() - startedMs) / 1000 / audioSeconds);
        this.metrics.audioSeconds.inc(audioSeconds);
      }
    } finally {
      resampler?.close();
      this.logger.info("speech finished", { engine_request_id: stream.requestId, mode, finish_reason: stream.finishReason ?? "abort", frames: tally.frames, audio_seconds: Number((tally.samples / prepared.outputSampleRateHz).toFixed(3)) });
    }
  }

  /** The whole utterance as one encoded file, speed changed, and its length in seconds. */
  async #encodedFile(prepared: PreparedSpeech, pcm: AsyncIterable<Float32Array>, signal: AbortSignal): Promise<{ bytes: Uint8Array; seconds: number }> {
    const chunks: Float32Array[] = [];
    for await (const chunk of pcm) chunks.push(chunk);
    if (signal.aborted) throw clientLeft();
    const { bytes, sampleCount } = await this.renderFile(concatFloat32(chunks), prepared.outputSampleRateHz, prepared.responseFormat, prepared.encoding, prepared.speed);
    return { bytes, seconds: sampleCount / prepared.outputSampleRateHz };
  }

  /**
   * A whole file from its samples (handed to an encoder worker, not copied: the caller gives them up), speed
   * changed, and its length in samples; counted among the files encoding, which admission bounds.
   */
  async renderFile(samples: Float32Array, sampleRateHz: number, format: ResponseFormat, encoding: EncodingOptions, speed = 1): Promise<{ bytes: Uint8Array; sampleCount: number }> {
    this.#filesEncoding++;
    try {
      return await renderAudioFile(samples, sampleRateHz, format, encoding, speed);
    } finally {
      this.#filesEncoding--;
    }
  }
}

/**
 * The audio in its response format, each chunk's bytes as soon as the format can give them: the joined
 * bytes are one file (a WAV's header carries sizes 0xFFFFFFFF, which players read as "until EOF"), and a
 * player can start on the first.
 */
async function* encodedStream(prepared: PreparedSpeech, pcm: AsyncIterable<Float32Array>, signal: AbortSignal): AsyncGenerator<Uint8Array, void, undefined> {
  const encoder = await createStreamEncoder(prepared.responseFormat, prepared.outputSampleRateHz, prepared.encoding);
  let ended = false;
  try {
    for await (const samples of pcm) {
      const bytes = await encoder.push(samples);
      if (bytes.byteLength > 0) yield bytes;
    }
    if (signal.aborted) return;
    ended = true;
    const rest = await encoder.end();
    if (rest.byteLength > 0) yield rest;
  } finally {
    if (!ended) encoder.close();
  }
}

/** The client closed the connection before its audio was ready: nobody receives the answer, and the status (nginx's 499, as for a body cut short) keeps a hang-up from counting as a bad request or a server fault. */
function clientLeft(): ApiError {
  return new ApiError(499, "The client closed the connection before its audio was ready");
}

/** All of `audio`'s pieces as one array: a file, or a whole stream. */
export async function wholeAudio(audio: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const pieces: Uint8Array[] = [];
  for await (const piece of audio) pieces.push(piece);
  return pieces.length === 1 ? pieces[0]! : concatBytes(pieces);
}

type StreamingMode = "sse" | "audio" | null;

/** Something to say: a letter or a digit. */
const SPEAKABLE = /[\p{L}\p{N}]/u;

/**
 * The text as the served model reads it (SpeechModel.readableText). When the model could read none of the
 * letters and digits sent, it is a 400 now rather than silence, or a failure once the audio has begun.
 */
function readableText(adapter: SpeechModel, text: string): { text: string; dropped: boolean } {
  const readable = adapter.readableText?.(text) ?? { text, dropped: false };
  if (readable.dropped && !SPEAKABLE.test(readable.text)) {
    throw badRequest(`input has nothing ${adapter.capabilities.modelId} can read (${adapter.capabilities.description}): its characters are of a script the model does not speak`, "input");
  }
  return readable;
}

function isG711(format: ResponseFormat): format is "ulaw" | "alaw" {
  return format === "ulaw" || format === "alaw";
}

function deliveryOf(transport: Transport, streaming: StreamingMode): DeliveryMode {
  if (transport === "batch") return "batch";
  if (transport === "wyoming") return "wyoming";
  if (transport !== "http") return "websocket";
  return streaming === "sse" ? "sse" : streaming === "audio" ? "audio_stream" : "file";
}

/**
 * Streamed audio leaves as it is made: no time-stretch, which needs the whole utterance. `option` names what
 * asked for streaming (HTTP's stream, the WebSocket's stream_audio; a Wyoming request has no speed to ask for).
 */
function checkStreamable(speed: number, option: "stream" | "stream_audio"): void {
  const streaming = option === "stream" ? "streaming" : "stream_audio";
  const turnOff = option === "stream" ? "stream" : "set stream_audio false";
  if (speed !== 1) throw badRequest(`speed is not supported with ${streaming}; omit speed or ${turnOff}`, "speed");
}

/** A built-in voice, or an uploaded one, which needs cloning (and may be one the model cannot use). */
type NamedVoice = { builtIn: string } | { uploaded: StoredVoice };

function canSpeakUpload(voice: StoredVoice, capabilities: ModelCapabilities): boolean {
  return capabilities.supportsCloning && voice.embedding_source === "audio";
}

/** What "default" (or no voice) means without an uploaded "default": the model's default voice, which a model without built-in voices lacks. */
function defaultBuiltInVoice(capabilities: ModelCapabilities): string {
  if (capabilities.voices.includes(capabilities.defaultVoice)) return capabilities.defaultVoice;
  throw badRequest(`Model '${capabilities.modelId}' has no built-in voices, so "default" names none. ${noVoicesHint(capabilities)}`, "voice");
}

function noVoicesHint(capabilities: ModelCapabilities): string {
  return capabilities.supportsCloning
    ? "Upload a voice (POST /v1/audio/voices) and pass its name as voice, or pass ref_audio with a 1–30 s clip to clone"
    : "It cannot clone voices either, so this server has no voice to speak with";
}

/** stream_format, when set, decides whatever stream says (as the seed does: clients send stream: false by default); stream alone means SSE. */
function streamingMode(request: SpeechRequest): StreamingMode {
  if (request.stream_format !== undefined) return request.stream_format;
  return request.stream === true ? "sse" : null;
}

/** Ignored fields named at most; the rest of a request's unknown extra_params keys go unnamed. */
const MAX_IGNORED_FIELDS = 32;
const MAX_IGNORED_FIELD_NAME_BYTES = 64;
const HEADER_SAFE_BYTE = /^[A-Za-z0-9_.~-]$/;

/**
 * An extra_params key as X-Ignored-Fields (and ignored_fields) name it. The key is client text, and a header
 * value may hold neither a newline, a NUL nor a character above U+00FF (`new Response()` throws on them):
 * every other byte of its UTF-8 is percent-encoded, a comma included since it separates the names, and the
 * result is cut to 64 bytes.
 */
export function headerSafeFieldName(key: string): string {
  let name = "";
  for (const byte of new TextEncoder().encode(key)) {
    const char = String.fromCharCode(byte);
    const piece = HEADER_SAFE_BYTE.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
    if (name.length + piece.length > MAX_IGNORED_FIELD_NAME_BYTES) return `${name}...`;
    name += piece;
  }
  return name;
}
