/**
 * OpenAI's dialect of a speech request (with vLLM-Omni's extensions), read into the core's spec: its model
 * names, its defaults (wav, or pcm16 on a streamed WebSocket sentence; `pcm` at OpenAI's 24 kHz), its stream
 * rules (stream, stream_format, stream_audio), and how it names the fields the served model ignored. The
 * speech route, batch items and the native WebSocket's sentences all read their requests here.
 */
import { ApiError, badRequest, echoed } from "../api/errors.ts";
import { OTHER_MODELS_FIELDS, VLLM_SAMPLING_FIELDS, type SpeechRequest } from "../api/speech.ts";
import type { DeliveryMode } from "../metrics.ts";
import type { SpeechDelivery, SpeechService, SpeechSpec, StartedSpeech, UnusedParts } from "../speech/service.ts";
import type { PlaceReservation } from "../engine/core.ts";
import type { CatalogScope, VoiceCatalog } from "../voices/catalog.ts";

/** The rate of OpenAI's `pcm` response format (16-bit little-endian mono at 24 kHz). */
export const OPENAI_PCM_SAMPLE_RATE_HZ = 24000;

/**
 * The speech models the `openai` SDK types (`SpeechModel`), answered by the served model: a client that
 * picks any of them works unchanged. Listed by /v1/models; later dated snapshots are accepted by pattern.
 */
export const OPENAI_SPEECH_MODELS: readonly string[] = ["tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15"];
const OPENAI_DATED_SPEECH_MODEL = /^(?:gpt-4o-mini-tts|gpt-4o-tts|tts-1|tts-1-hd)-\d{4}-\d{2}-\d{2}$/;

/**
 * Where a request arrived: the speech route (a file, a raw stream or SSE, as the request asks), a batch item,
 * or a WebSocket sentence sent whole (one binary message) or streamed (stream_audio).
 */
export type OpenAiRoute = "speech" | "batch" | "websocket_whole" | "websocket_streamed";

/** The fields of a request that say what to speak with and how, without its text: a WebSocket session's config. */
export type SpeechFields = Omit<SpeechRequest, "input">;

export interface OpenAiDialectDeps {
  service: SpeechService;
  catalog: VoiceCatalog;
  /** --served-model-name aliases: more model names that the served model answers to. */
  modelAliases: readonly string[];
}

/** What a request refused before its delivery is known counts as: a WebSocket sentence is a stream of its session. */
const REFUSED_AS: Readonly<Record<OpenAiRoute, DeliveryMode>> = { speech: "file", batch: "batch", websocket_whole: "websocket", websocket_streamed: "websocket" };

/** Every OpenAI route's uploads: served (Wyoming is the one listener that may not serve them). */
const SCOPE: CatalogScope = { uploads: true };

export class OpenAiSpeech {
  constructor(private readonly deps: OpenAiDialectDeps) {}

  servedModelIds(): string[] {
    const capabilities = this.deps.service.model().capabilities;
    return [...new Set([capabilities.modelId, ...OPENAI_SPEECH_MODELS, ...this.deps.modelAliases])];
  }

  checkModel(model: string | undefined): void {
    if (model === undefined) return;
    if (!this.servedModelIds().includes(model) && !OPENAI_DATED_SPEECH_MODEL.test(model)) {
      throw new ApiError(404, `The model '${echoed(model)}' does not exist. Served: ${this.servedModelIds().join(", ")}`, "model");
    }
  }

  /** A place held for the request `start` will bring `signal` for, or a 429 now (SpeechService.holdPlace). */
  holdPlace(signal: AbortSignal): PlaceReservation {
    return this.deps.service.holdPlace(signal);
  }

  /** `respond` with a place held for the request it starts with `signal` (SpeechService.withPlace). */
  withPlace(signal: AbortSignal, respond: () => Promise<Response>): Promise<Response> {
    return this.deps.service.withPlace(signal, respond);
  }

  /** One request through the core: read here, spoken there. */
  async start(request: SpeechRequest, route: OpenAiRoute, signal: AbortSignal, onAudio?: (seconds: number) => void): Promise<StartedSpeech> {
    let delivery: SpeechDelivery;
    let spec: SpeechSpec;
    try {
      delivery = this.#delivery(request, route);
      const checked = this.#checked(request, route, delivery);
      const voice = await this.deps.catalog.resolve({ name: voiceName(request), refAudio: request.ref_audio, refText: request.ref_text }, SCOPE, signal);
      spec = { ...checked, voice };
    } catch (error) {
      throw this.deps.service.refused(REFUSED_AS[route], signal, error);
    }
    return this.deps.service.start(spec, delivery, signal, onAudio);
  }

  /**
   * Checks a WebSocket session's fields before any text: what a sentence would be refused for, found now, and
   * the voice looked up (a reference clip fetched) without encoding it.
   */
  async check(fields: SpeechFields, route: OpenAiRoute, signal: AbortSignal): Promise<void> {
    const request = { ...fields, input: "" };
    this.#checked(request, route, this.#delivery(request, route));
    await this.deps.catalog.resolve({ name: voiceName(request), refAudio: request.ref_audio, refText: request.ref_text }, SCOPE, signal);
  }

  #delivery(request: SpeechRequest, route: OpenAiRoute): SpeechDelivery {
    const streaming = streamingMode(request);
    if (route !== "speech" && streaming !== null) throw badRequest("stream and stream_format are not accepted here", request.stream_format !== undefined ? "stream_format" : "stream");
    if (route === "batch") return { mode: "batch", streamed: false, admit: "now", whenFull: "wait" };
    // A WebSocket sentence is admitted when its audio is first read, after its audio.start, and refused by an error message.
    if (route === "websocket_whole") return { mode: "websocket", streamed: false, admit: "on-read", whenFull: "reject" };
    if (route === "websocket_streamed") return { mode: "websocket", streamed: true, admit: "on-read", whenFull: "reject" };
    return { mode: streaming === "sse" ? "sse" : streaming === "audio" ? "audio_stream" : "file", streamed: streaming !== null, admit: "now", whenFull: "reject" };
  }

  /** The request's own rules and defaults, checked in the order clients have always met them; everything but the voice. */
  #checked(request: SpeechRequest, route: OpenAiRoute, delivery: SpeechDelivery): Omit<SpeechSpec, "voice"> {
    const { service } = this.deps;
    const capabilities = service.model().capabilities;
    this.checkModel(request.model);
    const text = request.input.trim();
    if (text.length > service.maxInputChars) throw badRequest(`input must be at most ${service.maxInputChars} characters (got ${text.length})`, "input");
    // A streamed WebSocket sentence is pcm16 unless the config names a format (what its clients rely on).
    const format = request.response_format ?? (route === "websocket_streamed" ? "pcm" : "wav");
    // Raw pcm carries no rate, and OpenAI's is 24 kHz: clients such as Pipecat that ask for pcm play it at
    // 24 kHz whatever the model's own rate. Every other format says its rate, so it keeps the model's (or its
    // own: G.711's 8 kHz), and so does the WebSocket's pcm16 by default.
    const rateHz = request.sample_rate ?? (request.response_format === "pcm" ? OPENAI_PCM_SAMPLE_RATE_HZ : undefined);
    service.checkOutput(format, rateHz, capabilities);
    const instructions = request.instructions?.trim() || undefined;
    if (instructions !== undefined && instructions.length > service.maxInstructionsChars) {
      throw badRequest(`instructions must be at most ${service.maxInstructionsChars} characters`, "instructions");
    }
    const speed = request.speed ?? 1;
    if (delivery.streamed && speed !== 1) {
      const [streaming, turnOff] = route === "speech" ? ["streaming", "stream"] : ["stream_audio", "set stream_audio false"];
      throw badRequest(`speed is not supported with ${streaming}; omit speed or ${turnOff}`, "speed");
    }
    service.checkFileLength(text, delivery);
    if (request.word_timestamps && delivery.mode !== "websocket") {
      throw badRequest("word_timestamps are only available on the WebSocket route", "word_timestamps");
    }
    // vLLM's top-level temperature is the model's sampling temperature, unless extra_params names one.
    const temperature = request.temperature !== undefined && request.extra_params?.temperature === undefined ? { temperature: request.temperature } : {};
    const params = { ...temperature, ...(request.extra_params ?? {}) };
    service.parseExtraParams(params);
    return {
      text,
      output: { format, ...(rateHz === undefined ? {} : { rateHz }) },
      speed,
      sampling: { seed: request.seed, maxNewTokens: request.max_new_tokens, params },
      normalization: request.apply_text_normalization,
      instructions,
      language: request.language,
      nameIgnored: (unused) => ignoredFields(request, unused),
    };
  }
}

function voiceName(request: SpeechRequest): string | undefined {
  return typeof request.voice === "object" ? request.voice.id : request.voice;
}

type StreamingMode = "sse" | "audio" | null;

/** stream_format, when set, decides whatever stream says (as vLLM-Omni does: clients send stream: false by default); stream alone means SSE. */
function streamingMode(request: SpeechRequest): StreamingMode {
  if (request.stream_format !== undefined) return request.stream_format;
  return request.stream === true ? "sse" : null;
}

/** Ignored fields named at most; the rest of a request's unknown extra_params keys go unnamed. */
const MAX_IGNORED_FIELDS = 32;
const MAX_IGNORED_FIELD_NAME_BYTES = 64;
const HEADER_SAFE_BYTE = /^[A-Za-z0-9_.~-]$/;

/** The request's fields the served model cannot use, as X-Ignored-Fields names them (`extra_params.<key>` for its params). */
function ignoredFields(request: SpeechRequest, unused: UnusedParts): string[] {
  const params = new Set(unused.params);
  return [
    ...(unused.text ? ["input"] : []),
    ...(unused.instructions ? ["instructions"] : []),
    // No model here reads a language; "Auto", letting the model decide, is what each of them does.
    ...(request.language !== undefined && request.language.trim().toLowerCase() !== "auto" ? ["language"] : []),
    ...OTHER_MODELS_FIELDS.filter((field) => request[field] !== undefined),
    ...(request.temperature !== undefined && (request.extra_params?.temperature !== undefined || params.has("temperature")) ? ["temperature"] : []),
    ...VLLM_SAMPLING_FIELDS.filter((field) => request[field] !== undefined),
    // Only the first reference conditions the voice.
    ...(request.references ?? []).slice(1).map((_, index) => `references.${index + 1}`),
    ...Object.keys(request.extra_params ?? {})
      .filter((key) => params.has(key))
      .map((key) => `extra_params.${headerSafeFieldName(key)}`),
  ].slice(0, MAX_IGNORED_FIELDS);
}

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
