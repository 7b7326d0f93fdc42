/**
 * The speech core, protocol-neutral: `start(spec, delivery, signal)` takes what every front end has once it
 * has read its own request (the text, a voice the catalog resolved, the output format and rate, sampling and
 * normalization) and gives the audio, encoded or as samples, and how the generation ended. It checks what
 * depends on the loaded model (lengths, rates, what the model can read), drives the engine and shapes its
 * audio for delivery (resample, speed, encode). It knows no protocol: each dialect's defaults, field names
 * and stream rules live beside its routes.
 */
import type { Config } from "../config.ts";
import type { FinishReason, SpeechModel } from "../models/contract.ts";
import type { ModelHost } from "../engine/host.ts";
import type { Engine, PlaceReservation } from "../engine/core.ts";
import { STREAM_OUTCOMES } from "../engine/request.ts";
import { silentLogger, type Logger } from "../log/logger.ts";
import { ApiError, badRequest, echoed } from "../api/errors.ts";
import { samplingParamsSchema } from "../api/sampling-params.ts";
import { DEFAULT_MAX_INPUT_CHARS } from "../api/speech.ts";
import type { DeliveryMode, ServiceMetrics } from "../metrics.ts";
import { renderAudioFile, type EncodingOptions, type ResponseFormat } from "../audio/encoders.ts";
import { codecOf } from "../audio/formats.ts";
import { encodedStream, int16Samples } from "./audio-output.ts";
import { createStreamingResampler } from "../audio/resampler.ts";
import { concatFloat32 } from "../lib/concat.ts";
import type { VoiceStore } from "../voices/store.ts";
import { VoicePrompts } from "./voice-prompts.ts";
import type { PreparedSpeech, SamplesDelivery, SpeechDelivery, SpeechEnd, SpeechSpec, SpeechUsage, StartedSpeech, UnusedParts } from "./spec.ts";
import { utteranceJobInSlices } from "./job.ts";
import { PausedStream, type SpeechAudio } from "./paused-stream.ts";
import { markdownReadingOf } from "./markdown-reading.ts";
import { loadLexicon } from "./lexicon-file.ts";
import type { Lexicon } from "../text/lexicon.ts";
import type { MarkdownReadingOptions } from "../text/markdown.ts";

export { wholeAudio } from "./audio-output.ts";
export type { PreparedSpeech, SamplesDelivery, SpeechDelivery, SpeechEnd, SpeechSpec, SpeechUsage, StartedSpeech, UnusedParts } from "./spec.ts";

/** The output rates a request may ask for, whatever the model's own rate: the core resamples. */
export const OUTPUT_SAMPLE_RATES_HZ: readonly number[] = [8000, 16000, 22050, 24000, 44100, 48000];

/** Counts what a generation produced, filled in as audio flows. */
interface GenerationTally {
  frames: number;
  /** Samples at the output rate, before the speed change. */
  samples: number;
}

export class SpeechService {
  readonly #prompts: VoicePrompts;
  /**
   * Files whose audio is made and which the encoder workers have not finished: each holds its samples until
   * then. A file request is refused (429) while as many are encoding as the engine runs streams, so a burst of
   * long files waits in clients' retries, not in memory; a batch item waits for the engine, a few at a time.
   */
  #filesEncoding = 0;
  /** Places held for requests still being read, by the signal their `start` will bring (holdPlace). */
  readonly #held = new WeakMap<AbortSignal, PlaceReservation>();

  constructor(
    private readonly host: ModelHost,
    private readonly config: Config,
    private readonly metrics: ServiceMetrics,
    voices: VoiceStore,
    private readonly logger: Logger = silentLogger,
  ) {
    this.#prompts = new VoicePrompts(voices);
    this.lexicon = config.lexicon ? loadLexicon(config.lexicon) : undefined;
    this.markdownReading = markdownReadingOf(config);
  }

  /**
   * A running place (or one expected within --max-queue-wait) held for the request whose `start` will bring
   * `signal`, or an EngineFullError now: an HTTP route calls it first, so that a full server answers before
   * it reads the body, and the requests being read meanwhile count as taking their places. `start` takes the
   * place; `release` gives it back when the route ends without one (idempotent, so a route releases in a
   * `finally`).
   */
  holdPlace(signal: AbortSignal): PlaceReservation {
    const reservation = this.engine().reservePlace();
    this.#held.set(signal, reservation);
    return {
      release: () => {
        if (this.#held.get(signal) === reservation) this.#held.delete(signal);
        reservation.release();
      },
    };
  }

  /** `respond` with a place held for the request it starts with `signal` (holdPlace), given back when it ends. */
  async withPlace(signal: AbortSignal, respond: () => Promise<Response>): Promise<Response> {
    const place = this.holdPlace(signal);
    try {
      return await respond();
    } finally {
      place.release();
    }
  }

  /** How markdown is read (--read-markdown, --code-block-placeholder, --emoji), or undefined when it is spoken as sent. */
  readonly markdownReading: MarkdownReadingOptions | undefined;

  /** --lexicon: the server's alias rules, applied to every request's text. */
  readonly lexicon: Lexicon | undefined;

  get cachedVoicePrompts(): number {
    return this.#prompts.count;
  }

  /** Bytes of the cached voice prompts (one byte for each still being encoded). */
  get cachedVoicePromptBytes(): number {
    return this.#prompts.bytes;
  }

  /** --max-input-chars: the longest text one request, batch item or streamed segment may speak. */
  get maxInputChars(): number {
    return this.config.maxInputChars;
  }

  /** The ready model, or 503 while loading / after a failed load. */
  model(): SpeechModel {
    const model = this.host.model;
    if (model) return model;
    if (this.host.state === "failed") throw new ApiError(503, `The speech model failed to load: ${this.host.failure?.message}`);
    throw new ApiError(503, "The speech model is still loading; retry shortly");
  }

  /** The engine that runs the ready model, or 503 as `model()`. */
  engine(): Engine {
    this.model();
    return this.host.engine!;
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

  /** --max-instructions-chars. */
  get maxInstructionsChars(): number {
    return this.config.maxInstructionsChars;
  }

  /** The output rate of `format` at `rateHz` (by default the format's own, else the model's), or a 400 when it cannot be. */
  checkOutput(format: ResponseFormat, rateHz: number | undefined, capabilities: { nativeSampleRateHz: number }): number {
    const { fixedRateHz } = codecOf(format);
    const outputSampleRateHz = rateHz ?? fixedRateHz ?? capabilities.nativeSampleRateHz;
    if (fixedRateHz !== undefined && outputSampleRateHz !== fixedRateHz) {
      throw badRequest(`response_format ${format} is defined at ${fixedRateHz} Hz only; omit sample_rate or set it to ${fixedRateHz}`, "sample_rate");
    }
    if (!OUTPUT_SAMPLE_RATES_HZ.includes(outputSampleRateHz)) {
      throw badRequest(`sample_rate ${outputSampleRateHz} is not supported; supported: ${OUTPUT_SAMPLE_RATES_HZ.join(", ")}`, "sample_rate");
    }
    return outputSampleRateHz;
  }

  /**
   * A file (or a batch result) holds the whole utterance in memory until it is encoded: past the default cap
   * that is hundreds of MB, so long-form text, allowed by a raised --max-input-chars, must be streamed.
   */
  checkFileLength(text: string, delivery: SpeechDelivery): void {
    if ((delivery.mode === "file" || delivery.mode === "batch") && text.length > DEFAULT_MAX_INPUT_CHARS) {
      throw badRequest(
        `input longer than ${DEFAULT_MAX_INPUT_CHARS} characters must be streamed (stream_format "audio" or "sse", or the WebSocket route): a file response holds the whole utterance in memory`,
        "input",
      );
    }
  }

  /**
   * A request refused before its audio: the error to answer with (a 499 when the client has left). A WebSocket
   * sentence is a stream of its session, counted however it ends; a request refused before its response
   * starts is no stream.
   */
  refused(mode: DeliveryMode, signal: AbortSignal, error: unknown): unknown {
    if (mode === "websocket") this.metrics.countStreamEnd("websocket", STREAM_OUTCOMES[signal.aborted ? "abort" : "error"]);
    return signal.aborted ? clientLeft() : error;
  }

  /** Checks what depends on the configuration and the loaded model, and builds the job. Throws ApiError 4xx. */
  async prepare(spec: SpeechSpec, delivery: SpeechDelivery, signal: AbortSignal): Promise<PreparedSpeech> {
    const model = this.model();
    const capabilities = model.capabilities;
    const text = spec.text.trim();
    const { maxInputChars } = this.config;
    if (text.length > maxInputChars) throw badRequest(`input must be at most ${maxInputChars} characters (got ${text.length})`, "input");

    const responseFormat = spec.output.format;
    const outputSampleRateHz = this.checkOutput(responseFormat, spec.output.rateHz, capabilities);
    this.checkFileLength(text, delivery);
    const extraParams = this.parseExtraParams(spec.sampling.params);
    // Limits above are on the text as sent; the model reads, and usage counts, its normalized form, less
    // what the model cannot read.
    const { job, textDropped, parts, ssmlSpeed, ignoredSsml } = await utteranceJobInSlices(model, {
      text,
      markdown: this.markdownReading,
      lexicon: spec.lexicon ? spec.lexicon.with(this.lexicon) : this.lexicon,
      normalization: spec.normalization,
      builtInVoice: spec.voice.kind === "built-in" ? spec.voice.name : undefined,
      language: spec.language,
      seed: spec.sampling.seed,
      maxNewTokens: spec.sampling.maxNewTokens,
      instructions: spec.instructions,
      extraParams,
    });
    // An SSML document's <prosody rate> is its speed unless the request sets one; a stream cannot change it.
    const ssmlIgnored = ignoredSsml.map((name) => `<${name}>`);
    if (ssmlSpeed !== undefined && delivery.streamed) ssmlIgnored.push("<prosody rate>");
    const requestSpeed = spec.speed ?? 1;
    const speed = requestSpeed !== 1 || delivery.streamed ? requestSpeed : (ssmlSpeed ?? 1);
    // A time-stretch needs the whole utterance; each dialect says so in its own words before this.
    if (delivery.streamed && speed !== 1) throw badRequest("speed is not supported with streaming; omit speed", "speed");
    const unused: UnusedParts = {
      text: textDropped,
      instructions: Boolean(spec.instructions?.trim()) && !capabilities.supportsInstructions,
      params: Object.keys(spec.sampling.params).filter((key) => !Object.hasOwn(extraParams, key)),
    };
    // Last: encoding a cloned voice is the one costly check.
    const voicePrompt = await this.#prompts.promptFor(spec.voice, model, this.engine(), signal);
    return {
      job: { ...job, voicePrompt },
      ...(parts ? { parts: parts.map((part) => ({ ...part, job: part.job && { ...part.job, voicePrompt } })) } : {}),
      responseFormat,
      outputSampleRateHz,
      encoding: spec.output.bitrateKbps === undefined ? {} : { bitrateKbps: spec.output.bitrateKbps },
      speed,
      delivery: delivery.mode,
      streamed: delivery.streamed,
      inputTextTokens: model.countInputTokens(job.text),
      inputAudioTokens: voicePrompt?.audioFrameCount ?? 0,
      ignoredFields: [...(spec.nameIgnored?.(unused) ?? []), ...ssmlIgnored],
    };
  }

  /**
   * One request, from its checks to its audio: `prepare`, then admission to the engine, then the audio as
   * `delivery` wants it. `onAudio` hears the seconds of each chunk as delivered (after the speed change); when
   * it throws, generation stops and `audio` throws that error. A client that left before its audio was ready
   * (`signal` aborted) is a 499, whatever the step it left at.
   */
  start(spec: SpeechSpec, delivery: SamplesDelivery, signal: AbortSignal, onAudio?: (seconds: number) => void): Promise<StartedSpeech<Float32Array>>;
  start(spec: SpeechSpec, delivery: SpeechDelivery, signal: AbortSignal, onAudio?: (seconds: number) => void): Promise<StartedSpeech<Uint8Array>>;
  async start(spec: SpeechSpec, delivery: SpeechDelivery | SamplesDelivery, signal: AbortSignal, onAudio?: (seconds: number) => void): Promise<StartedSpeech<Uint8Array> | StartedSpeech<Float32Array>> {
    // A full server says so before it reads anything (a text's normalization, a voice's encoding): refusing is
    // what a client past capacity is owed, at once. The place found is held while the request is read.
    // A sentence admitted when its audio is first read (a socket's) keeps the place its stream held for it
    // until then (TextStream holdPlace).
    let reservation: PlaceReservation | undefined;
    const now = delivery.admit === "now";
    try {
      if (delivery.whenFull === "reject") reservation = this.#held.get(signal) ?? (now ? this.engine().reservePlace() : undefined);
      this.#held.delete(signal);
      const prepared = await this.prepare(spec, delivery, signal);
      const admitted = now ? await this.#admit(prepared, delivery, signal, reservation) : undefined;
      let settle!: (end: SpeechEnd) => void;
      const done = new Promise<SpeechEnd>((resolve) => (settle = resolve));
      const audio = this.#deliver(prepared, delivery, admitted, signal, settle, onAudio, now ? undefined : reservation);
      return { prepared, audio, done } as StartedSpeech<Uint8Array> | StartedSpeech<Float32Array>;
    } catch (error) {
      reservation?.release();
      throw this.refused(delivery.mode, signal, error);
    } finally {
      if (now) reservation?.release();
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

  async #admit(prepared: PreparedSpeech, delivery: SpeechDelivery, signal: AbortSignal, reservation?: PlaceReservation): Promise<SpeechAudio> {
    const engine = this.engine();
    if (prepared.delivery === "file" && this.#filesEncoding >= engine.limits.maxStreams) throw engine.fullError();
    const options = { whenFull: delivery.whenFull, ...(reservation ? { reservation } : {}) };
    if (!prepared.parts) return engine.submit({ ...prepared.job, signal }, options);
    const firstJob = prepared.parts.find((part) => part.job)?.job;
    const first = firstJob ? await engine.submit({ ...firstJob, signal }, options) : undefined;
    return new PausedStream(prepared.parts, first, (job) => engine.submit({ ...job, signal }, { whenFull: "wait" }), this.model().capabilities.nativeSampleRateHz);
  }

  /**
   * The audio of `start`, and the one place a generation's end is told: its finish reason (the engine's, or
   * "abort" when the client left or its reader let go, "error" when it failed), the stream count derived
   * from it, and `done`.
   */
  async *#deliver(
    prepared: PreparedSpeech,
    delivery: SpeechDelivery | SamplesDelivery,
    admitted: SpeechAudio | undefined,
    signal: AbortSignal,
    settle: (end: SpeechEnd) => void,
    onAudio: ((seconds: number) => void) | undefined,
    reservation: PlaceReservation | undefined,
  ): AsyncGenerator<Uint8Array | Float32Array, void, undefined> {
    const tally: GenerationTally = { frames: 0, samples: 0 };
    let finishReason: FinishReason = "abort";
    let stream = admitted;
    let fileSeconds: number | undefined;
    try {
      stream ??= await this.#admit(prepared, delivery, signal, reservation);
      const pcm = this.#pcm(prepared, stream, signal, tally, onAudio);
      const samples = "audio" in delivery;
      if (samples && prepared.speed === 1) yield* pcm;
      else if (samples) {
        // The time-stretch runs where files are encoded (an encoder worker), which hands back pcm16.
        const file = await this.#encodedFile({ ...prepared, responseFormat: "pcm", encoding: {} }, pcm, signal);
        fileSeconds = file.seconds;
        yield int16Samples(file.bytes);
      } else if (prepared.streamed) yield* encodedStream(prepared, pcm, signal);
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
      reservation?.release();
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
  async *#pcm(prepared: PreparedSpeech, stream: SpeechAudio, signal: AbortSignal, tally: GenerationTally, onAudio: ((seconds: number) => void) | undefined): AsyncGenerator<Float32Array, void, undefined> {
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

/** The client closed the connection before its audio was ready: nobody receives the answer, and the status (nginx's 499, as for a body cut short) keeps a hang-up from counting as a bad request or a server fault. */
function clientLeft(): ApiError {
  return new ApiError(499, "The client closed the connection before its audio was ready");
}
