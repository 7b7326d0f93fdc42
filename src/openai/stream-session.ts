/**
 * The native WebSocket protocol (WS /v1/audio/speech/stream) as a codec over the text-stream core
 * (text-stream.ts): JSON messages are parsed and checked here and become the core's typed calls, and the
 * core's events become JSON messages and binary audio. Transport-free: the route hands messages in and
 * gives a sink to send through, so this file never sees a socket.
 */
import { ApiError, echoed, fromZodError } from "../api/errors.ts";
import { parseRequestJson } from "../api/request-json.ts";
import { STREAM_CLIENT_MESSAGE_TYPES, streamClientMessageSchema, type SpeechRequest, type StreamSessionConfig } from "../api/speech.ts";
import type { Logger } from "../log/logger.ts";
import type { SpeechService, StartedSpeech } from "../speech/service.ts";
import type { PlaceReservation } from "../engine/core.ts";
import { TextStream, type TextStreamEnding, type TextStreamError } from "../speech/text-stream.ts";
import { CLOSE_GOING_AWAY, CLOSE_NORMAL, CLOSE_POLICY, CLOSE_TOO_BIG, closeCodeOf, closeOf, ERRONEOUS_MESSAGE_FLOOD, ErroneousMessageBudget, MAX_CONFIG_MESSAGE_BYTES, MAX_INBOX_BYTES, MAX_TEXT_MESSAGE_BYTES } from "../speech/stream-rules.ts";

function messageBytes(data: string | ArrayBuffer | Uint8Array | Blob): number {
  if (typeof data === "string") return Buffer.byteLength(data);
  return data instanceof Blob ? data.size : data.byteLength;
}


export interface StreamSink {
  sendJson(message: Record<string, unknown>): void;
  sendBinary(bytes: Uint8Array): void;
  bufferedBytes(): number;
  close(code: number, reason: string): void;
}

/**
 * A session's sentences, spoken in the native protocol's dialect (OpenAI's, openai/dialect.ts): the
 * session's config is a speech request's fields, checked once when it arrives and applied to each sentence.
 */
export interface SentenceSpeech {
  start(request: SpeechRequest, route: SentenceRoute, signal: AbortSignal, onAudio?: (seconds: number) => void): Promise<StartedSpeech>;
  check(fields: Omit<SpeechRequest, "input">, route: SentenceRoute, signal: AbortSignal): Promise<void>;
  holdPlace(signal: AbortSignal): PlaceReservation;
}

/** A sentence sent whole (one binary message) or streamed as it is made (stream_audio). */
export type SentenceRoute = "websocket_whole" | "websocket_streamed";

export interface StreamSessionOptions {
  service: SpeechService;
  sentences: SentenceSpeech;
  logger: Logger;
  configTimeoutMs: number;
  idleTimeoutMs: number;
  /** Most segments waiting to be spoken; beyond it the session fails (1008) instead of growing. */
  maxQueuedSegments: number;
  /** Most characters of text waiting to be spoken (queued segments plus the unfinished one). */
  maxQueuedChars: number;
  /** How long a client may read nothing while audio waits for it before the session is dropped. */
  stallTimeoutMs: number;
}

function routeOf(config: StreamSessionConfig): SentenceRoute {
  return config.stream_audio ? "websocket_streamed" : "websocket_whole";
}

/** A config without the session's own fields: the speech request fields applied to each sentence. */
function speechFieldsOf(config: StreamSessionConfig): Omit<SpeechRequest, "input"> {
  const { type: _type, stream_audio: _streamAudio, split_granularity: _granularity, streaming_mode: _mode, ...speechFields } = config;
  return speechFields;
}

export class SpeechStreamSession {
  readonly #stream: TextStream<StreamSessionConfig>;
  #config: StreamSessionConfig | undefined;
  /** Text of a sentence_commit session since its last input.commit. */
  #commitBuffer = "";
  readonly #errorBudget = new ErroneousMessageBudget();

  constructor(
    private readonly sink: StreamSink,
    private readonly options: StreamSessionOptions,
  ) {
    this.#stream = new TextStream<StreamSessionConfig>(
      {
        sentenceStart: (sentence, speech) =>
          sink.sendJson({
            type: "audio.start",
            utterance_index: sentence.utteranceIndex,
            sentence_index: sentence.sentenceIndex,
            sentence_text: sentence.text,
            format: speech.prepared.responseFormat,
            sample_rate: speech.prepared.outputSampleRateHz,
            channels: 1,
          }),
        // Each sentence is a file or a stream of its own in the response format: a wav one opens with its header.
        audio: (bytes) => sink.sendBinary(bytes),
        sentenceDone: (sentence, end) => {
          // As in SSE's speech.audio.done: the fields of session.config the model ignored, when there are any.
          const ignored = end.ignoredFields.length > 0 ? { ignored_fields: end.ignoredFields } : {};
          sink.sendJson({ type: "audio.done", utterance_index: sentence.utteranceIndex, sentence_index: sentence.sentenceIndex, total_bytes: end.totalBytes, audio_seconds: end.audioSeconds, error: false, finish_reason: end.finishReason, ...ignored });
        },
        sentenceFailed: (sentence, error, sentBytes) => {
          // A full engine refuses the sentence, and then the session closes (1013): the client reconnects after
          // retry_after, to this replica or another, and sends the sentence again.
          const refusal = error.kind === "at_capacity" ? { code: 429, retry_after: error.retryAfterSeconds } : {};
          sink.sendJson({ type: "error", message: error.message, ...refusal, ...(sentBytes > 0 ? { partial_audio: true, action: "discard" } : {}) });
          sink.sendJson({ type: "audio.done", utterance_index: sentence.utteranceIndex, sentence_index: sentence.sentenceIndex, total_bytes: sentBytes, error: error.message, finish_reason: "error" });
        },
        utteranceDone: (utteranceIndex, totalSentences) => sink.sendJson({ type: "session.done", utterance_index: utteranceIndex, total_sentences: totalSentences }),
        ended: (ending) => {
          const { message, code, reason } = closeOf(ending);
          if (message !== undefined) sink.sendJson({ type: "error", message });
          sink.close(code, reason);
        },
        bufferedBytes: () => sink.bufferedBytes(),
      },
      {
        speak: (text, config, signal) => options.sentences.start({ ...speechFieldsOf(config), input: text, word_timestamps: undefined }, routeOf(config), signal),
        holdPlace: (signal) => options.sentences.holdPlace(signal),
        logger: options.logger,
        markdown: options.service.markdownReading,
        configTimeoutMs: options.configTimeoutMs,
        idleTimeoutMs: options.idleTimeoutMs,
        maxQueuedSegments: options.maxQueuedSegments,
        maxQueuedChars: options.maxQueuedChars,
        maxInputChars: options.service.maxInputChars,
        maxInboxBytes: MAX_INBOX_BYTES,
        stallTimeoutMs: options.stallTimeoutMs,
        endWhenFull: true,
      },
    );
  }

  /** A message from the client, text or binary, as received. */
  receive(data: string | ArrayBuffer | Uint8Array | Blob): void {
    this.#stream.handleInOrder(messageBytes(data), () => this.#handle(data));
  }

  /** A message with nothing to speak still shows the client is there: the idle timeout starts again. */
  keepAlive(): void {
    this.#stream.activity();
  }

  /** The socket closed (either side): stop generation, free everything. */
  closed(): void {
    this.#stream.closed();
  }

  /**
   * The server is shutting down: what input.done already flushed is finished, as after session.close (text
   * not yet flushed is dropped, and later messages are ignored), then the socket closes with 1001.
   */
  drain(): void {
    this.#stream.drain();
  }

  /** The shutdown grace is over: close now with 1001, stopping any generation. */
  goAway(): void {
    if (this.#stream.ended) return;
    this.sink.close(CLOSE_GOING_AWAY, "server shutting down");
    this.closed();
  }

  /** Segments, utterance ends and characters waiting (what the queue caps bound). */
  get queued(): { segments: number; utteranceEnds: number; chars: number } {
    return this.#stream.queued;
  }

  async #handle(data: string | ArrayBuffer | Uint8Array | Blob): Promise<void> {
    if (typeof data !== "string") return this.#stream.fail("invalid", "binary messages are not part of the protocol; send JSON text");
    const byteLength = Buffer.byteLength(data);
    if (byteLength > MAX_CONFIG_MESSAGE_BYTES) return this.#stream.fail("too_big", `message is larger than ${MAX_CONFIG_MESSAGE_BYTES} bytes`);
    let json: unknown;
    try {
      json = parseRequestJson(data);
    } catch {
      // As vLLM-Omni: a message that is not JSON, or of a type nobody sends, is answered and skipped.
      return this.#reject("message is not valid JSON; it was ignored");
    }
    const type = typeof json === "object" && json !== null ? (json as { type?: unknown }).type : undefined;
    if (!(STREAM_CLIENT_MESSAGE_TYPES as readonly unknown[]).includes(type)) {
      return this.#reject(`unknown message type ${typeof type === "string" ? `'${echoed(type)}'` : "(none)"}; it was ignored (types: ${STREAM_CLIENT_MESSAGE_TYPES.join(", ")})`);
    }
    const parsed = streamClientMessageSchema.safeParse(json);
    if (!parsed.success) return this.#stream.fail("invalid", fromZodError(parsed.error, "", json).message);
    const message = parsed.data;
    this.#stream.activity();

    if (message.type === "session.config") return this.#configure(message);
    if (message.type === "session.close") return this.#stream.close();
    if (!this.#config) return this.#stream.fail("invalid", "session.config must be the first message");
    switch (message.type) {
      case "input.text":
        if (byteLength > MAX_TEXT_MESSAGE_BYTES) return this.#stream.fail("too_big", `input.text is larger than 128 KiB (${MAX_TEXT_MESSAGE_BYTES} bytes)`);
        if (this.#config.streaming_mode !== "sentence_commit") return this.#stream.text(message.text);
        this.#commitBuffer += message.text;
        // Uncommitted text is one sentence to be: it has input's cap.
        if (this.#commitBuffer.length > this.options.service.maxInputChars) {
          return this.#stream.fail("too_big", `more than ${this.options.service.maxInputChars} characters are buffered without an input.commit; commit sooner`);
        }
        return;
      case "input.commit": {
        if (this.#config.streaming_mode !== "sentence_commit") return this.#reject(`input.commit is for streaming_mode "sentence_commit" (this session's is "${this.#config.streaming_mode}"); it was ignored`);
        // The text since the last commit is one sentence, however it is punctuated.
        const text = this.#commitBuffer.trim();
        this.#commitBuffer = "";
        const { utteranceIndex, sentenceIndex } = this.#stream.nextPosition;
        this.sink.sendJson({ type: "input.committed", commit_id: message.commit_id ?? null, sentence_index: text ? sentenceIndex : null, utterance_index: utteranceIndex });
        if (text) this.#stream.sentence(text);
        return;
      }
      case "input.done": {
        const uncommitted = this.#commitBuffer.trim();
        this.#commitBuffer = "";
        if (uncommitted) this.#stream.sentence(uncommitted);
        if (this.#stream.accepting) this.#stream.end();
        return;
      }
    }
  }

  async #configure(config: StreamSessionConfig): Promise<void> {
    try {
      // Everything a sentence would be refused for (voice, model, rates, ref_audio), found before any text.
      await this.options.sentences.check(speechFieldsOf(config), routeOf(config), this.#stream.signal);
    } catch (error) {
      if (error instanceof ApiError && error.status < 500) return this.#stream.fail("invalid", error.message);
      throw error;
    }
    const capabilities = this.options.service.model().capabilities;
    if (config.word_timestamps && !capabilities.supportsWordTimestamps) {
      return this.#stream.fail("invalid", `word_timestamps are not available: model '${capabilities.modelId}' (${capabilities.description}) cannot report word timings and no aligner is configured`);
    }
    const granularity = config.split_granularity ?? "sentence";
    const mode = config.streaming_mode ?? "sentence";
    // Text not yet committed under sentence_commit keeps its place when a config leaves that mode.
    let carried = "";
    if (this.#config?.streaming_mode === "sentence_commit" && mode !== "sentence_commit") {
      carried = this.#commitBuffer;
      this.#commitBuffer = "";
    }
    this.#config = { ...config, split_granularity: granularity, streaming_mode: mode };
    this.#stream.configure(this.#config, granularity, carried);
  }

  /** A message the session skips: the client is told, and the session goes on, within its budget of such messages. */
  #reject(message: string): void {
    if (!this.#errorBudget.spend()) return this.#stream.fail("invalid", `${ERRONEOUS_MESSAGE_FLOOD}; the session is closed`);
    this.sink.sendJson({ type: "error", message });
  }
}
