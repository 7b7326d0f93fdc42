/**
 * One Wyoming connection, as a text-to-speech server answers it (rhasspy/wyoming-piper is the reference):
 *
 * - `describe` → `info` (info.ts).
 * - `synthesize` → `audio-start`, `audio-chunk`s as the engine makes them, `audio-stop`: one audio group,
 *   since Home Assistant's one-shot reader stops at the first `audio-stop`.
 * - `synthesize-start`, `synthesize-chunk`…, `synthesize-stop` → one audio group per sentence as each
 *   sentence completes (text/segmenter.ts), then `synthesize-stopped`. Home Assistant's streaming reader
 *   writes one WAV header at the first `audio-start` and takes every `audio-chunk` until
 *   `synthesize-stopped`, so a group per sentence plays as one stream there, and a reader that stops at each
 *   `audio-stop` (wyoming-piper's streaming groups are the same) still gets whole sentences.
 * - A `synthesize` while a streaming run is open is ignored: Home Assistant sends the whole text that way
 *   before `synthesize-stop`, for servers that cannot stream, and it must be spoken once.
 *
 * A request that fails or is refused (an unknown voice, the engine at capacity, text past a cap) gets an
 * `error` event (`text`, `code`) and the connection goes on. Events are handled one at a time, in order; the
 * text of each request (a streaming run, a whole `synthesize`) is spoken by the text-stream core the
 * WebSocket routes use (speech/text-stream.ts: segmenting, ordered speaking, flow control), and every
 * sentence goes through SpeechService.start, so admission, fairness, metrics and cancellation are the
 * HTTP routes' own. Transport-free: the server hands events in and gives a sink to send through.
 *
 * What a connection may hold is bounded in bytes both ways. Events waiting to be handled are counted by
 * their size on the wire, and past a small read-ahead the sink stops reading the client, so TCP holds back
 * the rest. An event is handled only once the replies already sent have mostly been taken: a client that
 * asks and never reads stops being read, and is dropped after the stall timeout.
 */
import { waitForDrain } from "../async/drain.ts";
import { MAX_TEXT_MESSAGE_BYTES } from "../speech/stream-rules.ts";
import { TextStream, type TextStreamEnding, type TextStreamEvents } from "../speech/text-stream.ts";
import { ApiError, badRequest, fromZodError } from "../api/errors.ts";
import { synthesizeChunkDataSchema, synthesizeDataSchema, synthesizeStartDataSchema, type WyomingVoiceSelection } from "./schema.ts";
import { SerialQueue } from "../async/serial-queue.ts";
import { asApiError } from "../speech/errors.ts";
import type { Logger } from "../log/logger.ts";
import { OUTPUT_SAMPLE_RATES_HZ, type SpeechDelivery, type SpeechService, type SpeechSpec } from "../speech/service.ts";
import type { VoiceCatalog } from "../voices/catalog.ts";
import type { InfoSource } from "./info.ts";
import type { ReceivedEvent, WyomingEvent } from "./protocol.ts";
import { WyomingRequestLog } from "./request-log.ts";

/** pcm16 mono: what every audio event says. */
const SAMPLE_WIDTH_BYTES = 2;
const CHANNELS = 1;
/** Samples per audio-chunk at most: wyoming-piper's default (--samples-per-chunk), 64 ms at 16 kHz. */
export const SAMPLES_PER_CHUNK = 1024;
/**
 * Bytes of events that may wait to be handled (they queue while a sentence is spoken) with the client still
 * read. Past it the client is not read until the queue is back under it. Home Assistant's chunks of a
 * streamed answer fit, so its connection is read on and its disconnect seen at once. Events count their
 * size on the wire (data skipped unread too: reading it waits as well) and EVENT_OVERHEAD_BYTES, what
 * holding one costs beyond its bytes.
 */
export const INBOX_READ_AHEAD_BYTES = 64 * 1024;
/**
 * Bytes of events waiting past which the connection is closed: reading stops far below it, so only bytes a
 * runtime had already read when told to stop can take the queue there.
 */
export const MAX_INBOX_BYTES = 8 * 1024 * 1024;
const EVENT_OVERHEAD_BYTES = 256;
/**
 * Unsent reply bytes above which the next event waits: a few `info` answers. Audio, which a client reads
 * as it plays, has its own mark (async/drain.ts).
 */
export const REPLY_HIGH_WATER_BYTES = 64 * 1024;
/**
 * How long a connection whose last answer was an error waits for its next event. Home Assistant's one-shot
 * reader skips error events and waits for an audio-stop that will not come, so it learns of the failure when
 * the connection closes; a client that reads errors sends its next event (a describe, another synthesize)
 * long before this.
 */
export const IDLE_AFTER_ERROR_MS = 2000;
/** The error code of text past a cap (the WebSocket routes close with 1009 for the same). */
export const TEXT_TOO_LONG = "text_too_long";

export interface WyomingSink {
  send(event: WyomingEvent): void;
  /** Bytes written and not yet handed to the network: the flow-control signal. */
  bufferedBytes(): number;
  /** Stops (false) or resumes (true) reading the client: while stopped, TCP holds back what it sends. */
  setReading(reading: boolean): void;
  /** Ends the connection once what was sent has been flushed. */
  close(): void;
}

/** Raw pcm16 streamed as it is made, admitted at once: a full engine is an error event before audio-start. */
const WYOMING_DELIVERY: SpeechDelivery = { mode: "wyoming", streamed: true, admit: "now", whenFull: "reject" };
/** The rate for a model whose own rate is not one the core makes: OpenAI's pcm rate, which every client plays. */
const FALLBACK_RATE_HZ = 24000;

export interface WyomingSessionOptions {
  service: SpeechService;
  catalog: VoiceCatalog;
  /** Uploaded voices are spoken here (config.ts, wyomingExposure). */
  uploadedVoices: boolean;
  /** Answers describe, shared by the listener's connections. */
  info: InfoSource;
  logger: Logger;
  /** Most characters one streaming run may carry (the WebSocket routes' --ws-max-queued-chars). */
  maxRunChars: number;
  /** How long a client may read nothing while audio waits for it before the connection is dropped. */
  stallTimeoutMs: number;
  /** How long a connection may stay without events and with nothing to do before it is closed. */
  idleTimeoutMs: number;
}

/** What one request's text is spoken with: the voice asked for, and the log line its audio and failures go to. */
interface SpeechTarget {
  voice: WyomingVoiceSelection | undefined;
  log: WyomingRequestLog;
}

/** The streaming run between synthesize-start and synthesize-stop. */
interface StreamingRun {
  log: WyomingRequestLog;
  /**
   * Its sentences; none when its voice or its text was refused (one error event said so): its text is then
   * taken and not spoken.
   */
  speech: TextStream<SpeechTarget> | undefined;
  /** Characters received in its chunks. */
  receivedChars: number;
}

export class WyomingSession {
  readonly #inbox = new SerialQueue();
  /** Wire bytes (and overhead) of the events received and not yet handled, the one being handled included. */
  #inboxBytes = 0;
  #reading = true;
  #run: StreamingRun | undefined;
  /** The request being answered, whose log line a disconnect ends as the client leaving. */
  #activeLog: WyomingRequestLog | undefined;
  /** The text streams speaking now: a run's, or a whole synthesize's. */
  readonly #speaking = new Set<TextStream<SpeechTarget>>();
  #closed = false;
  /** The server is shutting down: finish what was asked, then close. */
  #draining = false;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  /** An error event was the last thing sent, with no event from the client since. */
  #answeredWithError = false;

  constructor(
    private readonly sink: WyomingSink,
    private readonly options: WyomingSessionOptions,
  ) {
    this.#armIdle();
  }

  /** An event from the client, in arrival order. */
  receive(event: ReceivedEvent): void {
    if (this.#closed) return;
    clearTimeout(this.#idleTimer);
    this.#answeredWithError = false;
    const cost = event.wireBytes + EVENT_OVERHEAD_BYTES;
    this.#inboxBytes += cost;
    if (this.#inboxBytes > MAX_INBOX_BYTES) {
      this.#sendError(`more than ${MAX_INBOX_BYTES} bytes of events are waiting to be handled; wait for the audio before sending more`, "too_much_waiting");
      return this.#close();
    }
    this.#updateReading();
    void this.#inbox
      .run(async () => {
        await this.#waitForReplies();
        return this.#handle(event);
      })
      .catch((error) => {
        this.options.logger.error("wyoming event handling failed", { event_type: event.type.slice(0, 64), error: String(error) });
        this.#sendError("internal error", "internal_error");
      })
      .finally(() => {
        this.#inboxBytes -= cost;
        this.#updateReading();
        this.#afterWork();
      });
  }

  /** The connection closed (either side): stop generation, free everything. */
  closed(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#idleTimer);
    for (const speech of this.#speaking) speech.closed();
    this.#speaking.clear();
    // A one-shot synthesize is never answered while a run is open: at most one of the two is under way.
    this.#activeLog?.end(true);
    this.#run?.log.end(true);
    this.#run = undefined;
  }

  /** The server is shutting down: what was asked is finished (a streaming run up to its synthesize-stop), then the connection closes. */
  drain(): void {
    this.#draining = true;
    this.#afterWork();
  }

  /** The shutdown grace is over: close now, stopping any generation. */
  goAway(): void {
    this.#close();
  }

  async #handle(event: ReceivedEvent): Promise<void> {
    if (this.#closed) return;
    switch (event.type) {
      case "describe":
        return this.#describe();
      case "synthesize":
        return this.#synthesize(event);
      case "synthesize-start":
        return this.#startRun(event);
      case "synthesize-chunk":
        return this.#continueRun(event);
      case "synthesize-stop":
        return this.#stopRun();
      default:
        // Events of other services (wake, asr, satellites) are not ours to answer, as wyoming-piper ignores them.
        this.options.logger.debug("wyoming event ignored", { event_type: event.type.slice(0, 64) });
    }
  }

  async #describe(): Promise<void> {
    try {
      const info = await this.options.info.info();
      if (!this.#closed) this.sink.send(info);
    } catch (error) {
      this.#sendFailure(error);
    }
  }

  async #synthesize(event: ReceivedEvent): Promise<void> {
    // Home Assistant's copy of the streamed text, for servers that cannot stream: already being spoken.
    if (this.#run) return;
    const log = new WyomingRequestLog(this.options.logger, "synthesize");
    this.#activeLog = log;
    const parsed = synthesizeDataSchema.safeParse(event.data);
    if (event.skippedDataBytes !== undefined) {
      this.#sendError(`synthesize data of ${event.skippedDataBytes} bytes is more than a text of --max-input-chars (${this.options.service.maxInputChars} characters) takes; it was not read`, TEXT_TOO_LONG);
      log.noteFailure(413);
    } else if (!parsed.success) {
      this.#sendFailure(fromZodError(parsed.error), log);
    } else {
      log.noteText(parsed.data.text.length);
      const { maxInputChars } = this.options.service;
      // Refused before the speech service sees it, with the code a streaming run's text gets (the service would say invalid_request).
      if (parsed.data.text.length > maxInputChars) {
        this.#sendError(`synthesize text is longer than ${maxInputChars} characters (got ${parsed.data.text.length}); stream longer text with synthesize-start and synthesize-chunk`, TEXT_TOO_LONG);
        log.noteFailure(413);
      } else {
        // The whole text is one audio group, however it is punctuated (Home Assistant's one-shot reader stops at the first audio-stop).
        const speech = this.#openSpeech({ voice: parsed.data.voice ?? undefined, log });
        speech.sentence(parsed.data.text);
        await speech.spoken();
        this.#closeSpeech(speech);
      }
    }
    if (!this.#closed) log.end(false);
    this.#activeLog = undefined;
  }

  /**
   * Opens a run. Its voice is checked now, as a request would be, so a voice that cannot speak is one error
   * event, not one per sentence; the run still opens, so the client's chunks and its synthesize-stop get
   * the synthesize-stopped it waits for.
   */
  async #startRun(event: ReceivedEvent): Promise<void> {
    const parsed = synthesizeStartDataSchema.safeParse(event.skippedDataBytes === undefined ? event.data : {});
    if (!parsed.success) return this.#sendFailure(fromZodError(parsed.error));
    if (this.#run) return this.#sendError("synthesize-start while a streaming run is open; send synthesize-stop first (the event was ignored)", "run_already_open");
    const voice = parsed.data.voice ?? undefined;
    const run: StreamingRun = { log: new WyomingRequestLog(this.options.logger, "synthesize-start"), speech: undefined, receivedChars: 0 };
    this.#run = run;
    if (event.skippedDataBytes !== undefined) {
      run.log.noteFailure(400);
      return this.#sendError(`synthesize-start data of ${event.skippedDataBytes} bytes is more than a voice selection takes; it was not read (the run is not spoken)`, "invalid_request");
    }
    try {
      await this.options.catalog.check(this.#voiceName(voice, this.options.service.model().capabilities.languages), this.#scope);
    } catch (error) {
      if (this.#closed) return;
      return this.#sendFailure(error, run.log);
    }
    if (!this.#closed) run.speech = this.#openSpeech({ voice, log: run.log });
  }

  async #continueRun(event: ReceivedEvent): Promise<void> {
    const run = this.#run;
    if (!run) return this.#sendError("synthesize-chunk outside a streaming run; send synthesize-start first (the event was ignored)", "no_open_run");
    // The WebSocket routes' cap on one message, applied as the data arrives (protocol.ts skips it unread).
    if (event.skippedDataBytes !== undefined) {
      if (!run.speech) return;
      return this.#refuseRun(run, `synthesize-chunk data is larger than ${MAX_TEXT_MESSAGE_BYTES} bytes (got ${event.skippedDataBytes}); send the text in smaller chunks`);
    }
    const parsed = synthesizeChunkDataSchema.safeParse(event.data);
    if (!parsed.success) return this.#sendFailure(fromZodError(parsed.error), run.log);
    const { text } = parsed.data;
    run.log.noteText(text.length);
    if (!run.speech) return;
    run.receivedChars += text.length;
    // The WebSocket routes' cap on the text one session may have waiting.
    if (run.receivedChars > this.options.maxRunChars) return this.#refuseRun(run, `the streaming run's text is longer than ${this.options.maxRunChars} characters; start a new run for more`);
    run.speech.text(text);
    await run.speech.spoken();
  }

  /** The run's text is past a cap: one error event, and the rest of the run is taken and not spoken (synthesize-stop still answers). */
  #refuseRun(run: StreamingRun, message: string): void {
    if (run.speech) this.#closeSpeech(run.speech);
    run.speech = undefined;
    run.log.noteFailure(413);
    this.#sendError(`${message} (the rest of the run is not spoken)`, TEXT_TOO_LONG);
  }

  async #stopRun(): Promise<void> {
    const run = this.#run;
    if (!run) return this.#sendError("synthesize-stop outside a streaming run; send synthesize-start first (the event was ignored)", "no_open_run");
    if (run.speech) {
      run.speech.end();
      await run.speech.spoken();
      if (this.#closed) return;
      this.#closeSpeech(run.speech);
    }
    this.sink.send({ type: "synthesize-stopped", data: {} });
    this.#run = undefined;
    run.log.end(false);
  }

  /**
   * A text stream for one request, its settings given at once and its time kept by the connection. Each
   * sentence is one audio group: audio-start, the pcm16 as it is made, audio-stop. A refusal before any audio
   * is an error event alone; a failure after audio-start is an error event, then audio-stop, so a reader
   * waiting for the end of the group is not left waiting.
   */
  #openSpeech(target: SpeechTarget): TextStream<SpeechTarget> {
    const { service, logger, maxRunChars, stallTimeoutMs } = this.options;
    const speech = new TextStream<SpeechTarget>(this.#audioGroups(target.log), {
      speak: async (text, { voice }, signal) => service.start(await this.#speechSpec(text, voice, signal), WYOMING_DELIVERY, signal),
      logger,
      markdown: service.markdownReading,
      // Never what refuses text here: a run's cap counts the text it received, a whole text has its own, and
      // each event's sentences are spoken before the next event is read.
      maxQueuedSegments: Math.max(maxRunChars, service.maxInputChars),
      maxQueuedChars: Math.max(maxRunChars, service.maxInputChars),
      maxInputChars: service.maxInputChars,
      maxInboxBytes: MAX_INBOX_BYTES,
      stallTimeoutMs,
    });
    speech.configure(target);
    this.#speaking.add(speech);
    return speech;
  }

  #closeSpeech(speech: TextStream<SpeechTarget>): void {
    this.#speaking.delete(speech);
    speech.closed();
  }

  #audioGroups(log: WyomingRequestLog): TextStreamEvents {
    /** The audio group open now: its format, and the samples sent in it. */
    let group: { rateHz: number; samplesSent: number } | undefined;
    const format = (rateHz: number) => ({ rate: rateHz, width: SAMPLE_WIDTH_BYTES, channels: CHANNELS });
    const timestampMs = ({ rateHz, samplesSent }: { rateHz: number; samplesSent: number }) => Math.round((samplesSent / rateHz) * 1000);
    return {
      sentenceStart: (_sentence, speech) => {
        group = { rateHz: speech.prepared.outputSampleRateHz, samplesSent: 0 };
        this.sink.send({ type: "audio-start", data: { ...format(group.rateHz), timestamp: 0 } });
      },
      audio: (bytes) => {
        if (!group) return;
        for (const piece of chunksOf(bytes, SAMPLES_PER_CHUNK * SAMPLE_WIDTH_BYTES)) {
          this.sink.send({ type: "audio-chunk", data: { ...format(group.rateHz), timestamp: timestampMs(group) }, payload: piece });
          const samples = piece.byteLength / SAMPLE_WIDTH_BYTES;
          group.samplesSent += samples;
          log.noteAudio(samples / group.rateHz);
        }
      },
      sentenceDone: () => {
        if (group) this.sink.send({ type: "audio-stop", data: { timestamp: timestampMs(group) } });
        group = undefined;
      },
      sentenceFailed: (_sentence, error) => {
        const { text, code, status } = describeFailure(error.cause);
        log.noteFailure(status);
        this.#sendError(text, code);
        if (group) this.sink.send({ type: "audio-stop", data: {} });
        group = undefined;
      },
      utteranceDone: () => {},
      ended: (ending) => this.#speechEnded(ending),
      bufferedBytes: () => this.sink.bufferedBytes(),
    };
  }

  /** A text stream ends by itself only when its client stopped reading audio (or on a fault of ours): the connection closes. */
  #speechEnded(ending: TextStreamEnding): void {
    if (ending.kind === "stalled") this.options.logger.warn("wyoming client stopped reading; closing", { stall_timeout_ms: this.options.stallTimeoutMs });
    if (ending.kind === "broken") this.#sendError(ending.error.message, ending.error.kind === "too_big" ? TEXT_TOO_LONG : "internal_error");
    this.#close();
  }

  get #scope() {
    return { uploads: this.options.uploadedVoices };
  }

  /** One text in the core's terms: pcm16 at the model's own rate (no resampling), with the voice asked for. */
  async #speechSpec(text: string, voice: WyomingVoiceSelection | undefined, signal: AbortSignal): Promise<SpeechSpec> {
    const capabilities = this.options.service.model().capabilities;
    const rateHz = OUTPUT_SAMPLE_RATES_HZ.includes(capabilities.nativeSampleRateHz) ? capabilities.nativeSampleRateHz : FALLBACK_RATE_HZ;
    const resolved = await this.options.catalog.resolve({ name: this.#voiceName(voice, capabilities.languages) }, this.#scope, signal);
    return { text, voice: resolved, output: { format: "pcm", rateHz }, sampling: { params: {} } };
  }

  /** A name wins over a language (wyoming/tts.py); a language picks the default voice when the model speaks it. */
  #voiceName(voice: WyomingVoiceSelection | undefined, languages: readonly string[]): string | undefined {
    if (voice?.name) return voice.name;
    if (!voice?.language) return undefined;
    if (languages.some((language) => sameLanguage(language, voice.language!))) return undefined;
    throw badRequest(`no voice speaks '${voice.language.slice(0, 64)}'; languages: ${languages.join(", ")}`, "voice");
  }

  /**
   * Before an event is handled: the replies already sent are mostly taken. A client that sends and never
   * reads waits here, is not read meanwhile (its queue passes the read-ahead), and is dropped when stalled.
   */
  async #waitForReplies(): Promise<void> {
    if (this.sink.bufferedBytes() <= REPLY_HIGH_WATER_BYTES) return;
    const { stallTimeoutMs } = this.options;
    const outcome = await waitForDrain({ bufferedBytes: () => this.sink.bufferedBytes(), closed: () => this.#closed, stallTimeoutMs, highWaterBytes: REPLY_HIGH_WATER_BYTES });
    if (outcome !== "stalled") return;
    this.options.logger.warn("wyoming client stopped reading its replies; closing", { stall_timeout_ms: stallTimeoutMs });
    this.#close();
  }

  /** Reads the client while the events waiting are within the read-ahead; TCP holds back the rest. */
  #updateReading(): void {
    const reading = !this.#closed && this.#inboxBytes <= INBOX_READ_AHEAD_BYTES;
    if (reading === this.#reading) return;
    this.#reading = reading;
    this.sink.setReading(reading);
  }

  /** Once nothing is waiting: a draining session closes (unless a streaming run is still open), any other waits for its next event. */
  #afterWork(): void {
    if (this.#closed || this.#inbox.pendingCount > 0) return;
    if (this.#draining && !this.#run) return this.#close();
    this.#armIdle();
  }

  #armIdle(): void {
    clearTimeout(this.#idleTimer);
    const delayMs = this.#answeredWithError && !this.#run ? Math.min(IDLE_AFTER_ERROR_MS, this.options.idleTimeoutMs) : this.options.idleTimeoutMs;
    this.#idleTimer = setTimeout(() => {
      if (this.#inbox.pendingCount === 0) this.#close();
    }, delayMs);
  }

  #close(): void {
    if (this.#closed) return;
    this.sink.close();
    this.closed();
  }

  #sendFailure(error: unknown, log?: WyomingRequestLog): void {
    const { text, code, status } = describeFailure(error);
    if (status >= 500 && !asApiError(error)) this.options.logger.error("wyoming synthesis failed", { error: String(error) });
    log?.noteFailure(status);
    this.#sendError(text, code);
  }

  #sendError(text: string, code: string): void {
    if (this.#closed) return;
    this.sink.send({ type: "error", data: { text, code } });
    this.#answeredWithError = true;
  }
}

/**
 * An error as the error event says it: the message, a code a program can branch on, and the HTTP status
 * the access log shows.
 */
function describeFailure(raised: unknown): { text: string; code: string; status: number } {
  const error = asApiError(raised);
  if (!error) return { text: "speech generation failed", code: "synthesis_failed", status: 500 };
  const code = error.status === 429 ? "at_capacity" : error.status === 503 ? "unavailable" : error.param === "voice" ? "unknown_voice" : error.status < 500 ? "invalid_request" : "synthesis_failed";
  return { text: error.message, code, status: error.status };
}

/** `en_US`, `en-us` and `en` speak the same language as `en-US`. */
function sameLanguage(served: string, asked: string): boolean {
  const normalize = (tag: string) => tag.replace(/_/g, "-").toLowerCase();
  const [servedTag, askedTag] = [normalize(served), normalize(asked)];
  return servedTag === askedTag || servedTag.split("-")[0] === askedTag.split("-")[0];
}

/** Whole samples, at most `maxBytes` at a time. */
function* chunksOf(bytes: Uint8Array, maxBytes: number): Generator<Uint8Array> {
  for (let offset = 0; offset < bytes.byteLength; offset += maxBytes) yield bytes.subarray(offset, Math.min(bytes.byteLength, offset + maxBytes));
}


