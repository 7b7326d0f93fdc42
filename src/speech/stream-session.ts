/**
 * One WebSocket speech session: configuration, text arriving in pieces, every complete segment
 * synthesised at once, audio delivered in order, utterance after utterance. Transport-free: the route
 * hands messages in and gives a sink to send through, so this file never sees a socket.
 *
 * Work runs in one queue per session, so sentences of an utterance leave in order and a later
 * session.config applies only to text that arrives after it.
 */
import type { StreamOutcome } from "../metrics.ts";
import { waitForDrain } from "../async/drain.ts";
import { ApiError, echoed, fromZodError } from "../api/errors.ts";
import { parseRequestJson } from "../api/request-json.ts";
import { STREAM_CLIENT_MESSAGE_TYPES, streamClientMessageSchema, type SpeechRequest, type StreamSessionConfig } from "../api/speech.ts";
import { SerialQueue } from "../async/serial-queue.ts";
import type { Logger } from "../log/logger.ts";
import { TextSegmenter } from "../text/segmenter.ts";
import type { SpeechService, StartedSpeech } from "./service.ts";
import { EngineFullError } from "../engine/errors.ts";
import { asApiError } from "./errors.ts";
import type { EncodingOptions } from "../audio/encoders.ts";

/** Close codes of RFC 6455 the protocol uses. */
export const CLOSE_NORMAL = 1000;
/** The server is shutting down (RFC 6455 §7.4.1: "going away"): a client reconnects, to another replica. */
export const CLOSE_GOING_AWAY = 1001;
export const CLOSE_POLICY = 1008;
export const CLOSE_TOO_BIG = 1009;

/**
 * How a session's socket ended, from the code we closed it with (undefined: the client closed it first).
 * Closed by us with 1000/1001 is a session that ran its course; other codes are its protocol errors.
 */
export function outcomeOfClose(serverCloseCode: number | undefined): StreamOutcome {
  if (serverCloseCode === undefined) return "aborted";
  return serverCloseCode === CLOSE_NORMAL || serverCloseCode === CLOSE_GOING_AWAY ? "completed" : "failed";
}

export const MAX_CONFIG_MESSAGE_BYTES = 4 * 1024 * 1024;
export const MAX_TEXT_MESSAGE_BYTES = 128 * 1024;
/**
 * Bytes of client messages waiting to be handled (messages queue while a session.config is checked, which
 * may fetch and encode a ref_audio): two of the largest messages. Each message also counts
 * INBOX_MESSAGE_OVERHEAD_BYTES, what holding it costs beyond its text, so a flood of tiny ones is bounded too.
 */
export const MAX_INBOX_BYTES = 2 * MAX_CONFIG_MESSAGE_BYTES;
const INBOX_MESSAGE_OVERHEAD_BYTES = 256;

/**
 * Erroneous messages a connection may send (answered with an error, the connection kept): a burst of
 * ERRONEOUS_MESSAGE_BURST, refilled at ERRONEOUS_MESSAGES_PER_SECOND, so an agent that errs now and then over
 * hours keeps its socket while a flood of them is closed (1008) after a few dozen replies instead of costing
 * the event loop a parse and a reply each, and the client's unread replies a growing send buffer.
 */
export const ERRONEOUS_MESSAGE_BURST = 32;
export const ERRONEOUS_MESSAGES_PER_SECOND = 1;

export class ErroneousMessageBudget {
  #tokens = ERRONEOUS_MESSAGE_BURST;
  #refilledAtMs: number;

  constructor(private readonly clockMs: () => number = () => performance.now()) {
    this.#refilledAtMs = clockMs();
  }

  /** Counts one erroneous message; false once the budget is spent, when the connection must be closed. */
  spend(): boolean {
    const nowMs = this.clockMs();
    this.#tokens = Math.min(ERRONEOUS_MESSAGE_BURST, this.#tokens + ((nowMs - this.#refilledAtMs) / 1000) * ERRONEOUS_MESSAGES_PER_SECOND);
    this.#refilledAtMs = nowMs;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}

/** The close reason and error message once a connection's ErroneousMessageBudget is spent. */
export const ERRONEOUS_MESSAGE_FLOOD = `too many erroneous messages (more than ${ERRONEOUS_MESSAGE_BURST} at once, or ${ERRONEOUS_MESSAGES_PER_SECOND} a second after)`;

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
 * A session's sentences, spoken in the native protocol's dialect (OpenAI's, http/openai-speech.ts): the
 * session's config is a speech request's fields, checked once when it arrives and applied to each sentence.
 */
export interface SentenceSpeech {
  start(request: SpeechRequest, route: SentenceRoute, signal: AbortSignal, onAudio?: (seconds: number) => void, encoding?: EncodingOptions): Promise<StartedSpeech>;
  check(fields: Omit<SpeechRequest, "input">, route: SentenceRoute, signal: AbortSignal): Promise<void>;
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
  /** A codec bitrate beyond what session.config says (ElevenLabs' sockets name one in output_format). */
  encoding?: EncodingOptions;
}

type WorkItem =
  | { kind: "segment"; text: string; config: StreamSessionConfig; utteranceIndex: number; sentenceIndex: number }
  | { kind: "utterance-end"; utteranceIndex: number; totalSentences: number };

export class SpeechStreamSession {
  #config: StreamSessionConfig | undefined;
  #segmenter = new TextSegmenter("sentence");
  /** Text of a sentence_commit session since its last input.commit. */
  #commitBuffer = "";
  #utteranceIndex = 0;
  #sentenceIndex = 0;
  readonly #work: WorkItem[] = [];
  /** Characters of the segments in #work. */
  #queuedChars = 0;
  #working = false;
  /** session.close arrived (or the server is shutting down): finish the queued work, then close. */
  #closing = false;
  #closingCode = CLOSE_NORMAL;
  /** Messages are handled one at a time, in arrival order (config validation awaits). */
  readonly #inbox = new SerialQueue();
  /** Bytes of the messages in #inbox (with their overhead), bounded by MAX_INBOX_BYTES. */
  #inboxBytes = 0;
  readonly #abort = new AbortController();
  #closed = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Whether #timer is the idle timer (else the configuration deadline, or none). */
  #idleTimerArmed = false;
  /** The last activity (performance.now()): the idle timer checks it when it fires. */
  #lastActivityMs = 0;
  readonly #errorBudget = new ErroneousMessageBudget();

  constructor(
    private readonly sink: StreamSink,
    private readonly options: StreamSessionOptions,
  ) {
    this.#arm(options.configTimeoutMs, () => this.#fail("session.config must arrive within the configuration deadline", CLOSE_POLICY));
  }

  /** A message from the client, text or binary, as received. */
  receive(data: string | ArrayBuffer | Uint8Array | Blob): void {
    if (this.#closed || this.#closing) return;
    const cost = messageBytes(data) + INBOX_MESSAGE_OVERHEAD_BYTES;
    this.#inboxBytes += cost;
    if (this.#inboxBytes > MAX_INBOX_BYTES) {
      return this.#fail(`more than ${MAX_INBOX_BYTES} bytes of messages are waiting to be handled; wait for the server's answers before sending more`, CLOSE_POLICY);
    }
    void this.#inbox
      .run(() => this.#handle(data))
      .catch((error) => {
        this.options.logger.error("websocket message handling failed", { error: String(error) });
        this.#fail("internal error", CLOSE_POLICY);
      })
      .finally(() => {
        this.#inboxBytes -= cost;
      });
  }

  /**
   * A message with nothing to speak (ElevenLabs' keep-alives: `{"text": " "}`, `{"text": "", "context_id"}`)
   * still shows the client is there: the idle timeout starts again.
   */
  keepAlive(): void {
    this.#resetIdle();
  }

  /** The socket closed (either side): stop generation, free everything. */
  closed(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#abort.abort();
    this.#work.length = 0;
    this.#queuedChars = 0;
    this.#segmenter = new TextSegmenter("sentence");
  }

  /**
   * The server is shutting down: what input.done already flushed is finished, as after session.close (text
   * not yet flushed is dropped, and later messages are ignored), then the socket closes with 1001.
   */
  drain(): void {
    if (this.#closed) return;
    this.#closing = true;
    this.#closingCode = CLOSE_GOING_AWAY;
    if (!this.#working) this.#closeNormally();
  }

  /** The shutdown grace is over: close now with 1001, stopping any generation. */
  goAway(): void {
    if (this.#closed) return;
    this.sink.close(CLOSE_GOING_AWAY, "server shutting down");
    this.closed();
  }

  /**
   * Segments, utterance ends and characters waiting (what the queue caps bound). Each utterance end is a
   * session.done still to send: the segment cap bounds them too, counted on their own, so a flood of empty
   * input.done cannot grow the queue without bound.
   */
  get queued(): { segments: number; utteranceEnds: number; chars: number } {
    const segments = this.#work.filter((item) => item.kind === "segment").length;
    return { segments, utteranceEnds: this.#work.length - segments, chars: this.#queuedChars };
  }

  async #handle(data: string | ArrayBuffer | Uint8Array | Blob): Promise<void> {
    if (this.#closed || this.#closing) return;
    if (typeof data !== "string") return this.#fail("binary messages are not part of the protocol; send JSON text", CLOSE_POLICY);
    const byteLength = Buffer.byteLength(data);
    if (byteLength > MAX_CONFIG_MESSAGE_BYTES) return this.#fail(`message is larger than ${MAX_CONFIG_MESSAGE_BYTES} bytes`, CLOSE_TOO_BIG);
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
    if (!parsed.success) return this.#fail(fromZodError(parsed.error, "", json).message, CLOSE_POLICY);
    const message = parsed.data;
    this.#resetIdle();

    switch (message.type) {
      case "session.config":
        return this.#configure(message);
      case "input.text":
        if (!this.#config) return this.#fail("session.config must be the first message", CLOSE_POLICY);
        if (byteLength > MAX_TEXT_MESSAGE_BYTES) return this.#fail(`input.text is larger than 128 KiB (${MAX_TEXT_MESSAGE_BYTES} bytes)`, CLOSE_TOO_BIG);
        if (this.#config.streaming_mode === "sentence_commit") {
          this.#commitBuffer += message.text;
          // Uncommitted text is one sentence to be: it has input's cap.
          if (this.#commitBuffer.length > this.options.service.maxInputChars) {
            return this.#fail(`more than ${this.options.service.maxInputChars} characters are buffered without an input.commit; commit sooner`, CLOSE_TOO_BIG);
          }
          return;
        }
        for (const text of this.#segmenter.push(message.text)) {
          this.#enqueueSegment(text);
          if (this.#overQueueCap()) return;
        }
        // With split_granularity "none" everything waits for input.done, to be spoken as one input: it has input's cap.
        if (this.#segmenter.pendingLength > this.options.service.maxInputChars) {
          return this.#fail(`more than ${this.options.service.maxInputChars} characters are buffered without a segment end; send input.done sooner`, CLOSE_TOO_BIG);
        }
        this.#overQueueCap();
        return;
      case "input.commit": {
        if (!this.#config) return this.#fail("session.config must be the first message", CLOSE_POLICY);
        if (this.#config.streaming_mode !== "sentence_commit") return this.#reject(`input.commit is for streaming_mode "sentence_commit" (this session's is "${this.#config.streaming_mode}"); it was ignored`);
        // The text since the last commit is one sentence, however it is punctuated.
        const text = this.#commitBuffer.trim();
        this.#commitBuffer = "";
        const sentenceIndex = this.#sentenceIndex;
        if (text) this.#enqueueSegment(text);
        this.sink.sendJson({ type: "input.committed", commit_id: message.commit_id ?? null, sentence_index: text ? sentenceIndex : null, utterance_index: this.#utteranceIndex });
        this.#overQueueCap();
        return;
      }
      case "input.done":
        if (!this.#config) return this.#fail("session.config must be the first message", CLOSE_POLICY);
        const uncommitted = this.#commitBuffer.trim();
        if (uncommitted) this.#enqueueSegment(uncommitted);
        this.#commitBuffer = "";
        for (const text of this.#segmenter.flush()) {
          this.#enqueueSegment(text);
          if (this.#overQueueCap()) return;
        }
        this.#enqueue({ kind: "utterance-end", utteranceIndex: this.#utteranceIndex, totalSentences: this.#sentenceIndex });
        this.#utteranceIndex++;
        this.#sentenceIndex = 0;
        this.#overQueueCap();
        return;
      case "session.close":
        // What input.done flushed is finished first; text never flushed is dropped.
        this.#closing = true;
        if (!this.#working) this.#closeNormally();
        return;
    }
  }

  async #configure(config: StreamSessionConfig): Promise<void> {
    const { type: _type, stream_audio: _streamAudio, split_granularity: granularity, streaming_mode: _mode, ...speechFields } = config;
    try {
      // Everything a sentence would be refused for (voice, model, rates, ref_audio), found before any text.
      await this.options.sentences.check(speechFields, config.stream_audio ? "websocket_streamed" : "websocket_whole", this.#abort.signal);
    } catch (error) {
      if (error instanceof ApiError && error.status < 500) return this.#fail(error.message, CLOSE_POLICY);
      throw error;
    }
    const capabilities = this.options.service.model().capabilities;
    if (config.word_timestamps && !capabilities.supportsWordTimestamps) {
      return this.#fail(`word_timestamps are not available: model '${capabilities.modelId}' (${capabilities.description}) cannot report word timings and no aligner is configured`, CLOSE_POLICY);
    }
    const nextGranularity = granularity ?? "sentence";
    if (!this.#config || nextGranularity !== this.#config.split_granularity) {
      // Text already buffered under the old granularity keeps its place in line.
      const pending = this.#segmenter.flush().join(" ");
      this.#segmenter = new TextSegmenter(nextGranularity);
      if (pending) for (const text of this.#segmenter.push(pending + " ")) this.#enqueueSegment(text);
    }
    const nextMode = config.streaming_mode ?? "sentence";
    // Text not yet committed under sentence_commit keeps its place when a config leaves that mode.
    if (this.#config?.streaming_mode === "sentence_commit" && nextMode !== "sentence_commit" && this.#commitBuffer) {
      for (const text of this.#segmenter.push(this.#commitBuffer)) this.#enqueueSegment(text);
      this.#commitBuffer = "";
    }
    this.#config = { ...config, split_granularity: nextGranularity, streaming_mode: nextMode };
    this.#resetIdle();
  }

  /** Fails the session when its queue passes a cap; true when it did. */
  #overQueueCap(): boolean {
    const { maxQueuedSegments, maxQueuedChars } = this.options;
    const waitingChars = this.#queuedChars + this.#segmenter.pendingLength;
    const { segments, utteranceEnds } = this.queued;
    if (segments <= maxQueuedSegments && utteranceEnds <= maxQueuedSegments && waitingChars <= maxQueuedChars) return false;
    this.#fail(
      `too much text is waiting to be spoken (at most ${maxQueuedSegments} segments, ${maxQueuedSegments} utterance ends and ${maxQueuedChars} characters may be queued); wait for audio.done and session.done before sending more`,
      CLOSE_POLICY,
    );
    return true;
  }

  #closeNormally(): void {
    if (this.#closed) return;
    this.sink.close(this.#closingCode, this.#closingCode === CLOSE_GOING_AWAY ? "server shutting down" : "session closed");
    this.closed();
  }

  #enqueueSegment(text: string): void {
    this.#queuedChars += text.length;
    this.#enqueue({ kind: "segment", text, config: this.#config!, utteranceIndex: this.#utteranceIndex, sentenceIndex: this.#sentenceIndex++ });
  }

  #enqueue(item: WorkItem): void {
    this.#work.push(item);
    if (!this.#working) void this.#drainWork();
  }

  async #drainWork(): Promise<void> {
    this.#working = true;
    try {
      for (let item = this.#work.shift(); item && !this.#closed; item = this.#work.shift()) {
        if (item.kind === "segment") this.#queuedChars -= item.text.length;
        if (item.kind === "utterance-end") {
          // A client that reads nothing holds its session.done messages here, within the queue's cap, not in
          // the socket's unbounded send buffer.
          await this.#waitForDrain();
          if (this.#closed) break;
          this.sink.sendJson({ type: "session.done", utterance_index: item.utteranceIndex, total_sentences: item.totalSentences });
        } else {
          await this.#speak(item);
        }
      }
    } finally {
      this.#working = false;
      if (this.#closing) this.#closeNormally();
      else this.#resetIdle();
    }
  }

  /**
   * One sentence: audio.start, its audio (one binary message, or a stream of them with stream_audio), then
   * audio.done. The service counts how it ended; a socket closed on the way is the client leaving.
   */
  async #speak(item: Extract<WorkItem, { kind: "segment" }>): Promise<void> {
    const { type: _type, stream_audio: streamAudio, split_granularity: _granularity, streaming_mode: _mode, ...speechFields } = item.config;
    const signal = this.#abort.signal;
    let sentBytes = 0;
    const position = { utterance_index: item.utteranceIndex, sentence_index: item.sentenceIndex };
    try {
      const request: SpeechRequest = { ...speechFields, input: item.text, word_timestamps: undefined };
      const speech = await this.options.sentences.start(request, streamAudio ? "websocket_streamed" : "websocket_whole", signal, undefined, this.options.encoding);
      const { prepared } = speech;
      this.sink.sendJson({
        type: "audio.start",
        ...position,
        sentence_text: item.text,
        format: prepared.responseFormat,
        sample_rate: prepared.outputSampleRateHz,
        channels: 1,
      });
      // Each sentence is a file or a stream of its own in the response format: a wav one opens with its header.
      for await (const bytes of speech.audio) {
        await this.#waitForDrain();
        if (this.#closed) break;
        this.sink.sendBinary(bytes);
        sentBytes += bytes.byteLength;
      }
      if (this.#closed) return;
      const { finishReason, audioSeconds } = await speech.done;
      // As in SSE's speech.audio.done: the fields of session.config the model ignored, when there are any.
      const ignored = prepared.ignoredFields.length > 0 ? { ignored_fields: prepared.ignoredFields } : {};
      this.sink.sendJson({ type: "audio.done", ...position, total_bytes: sentBytes, audio_seconds: audioSeconds, error: false, finish_reason: finishReason, ...ignored });
    } catch (error) {
      if (this.#closed || signal.aborted) return;
      const message = asApiError(error)?.message ?? "speech generation failed";
      if (!asApiError(error)) this.options.logger.error("websocket synthesis failed", { error: String(error) });
      // A full engine refuses the sentence, not the session: the client may send it again after retry_after.
      const refusal = error instanceof EngineFullError ? { code: 429, retry_after: error.retryAfterSeconds } : {};
      this.sink.sendJson({ type: "error", message, ...refusal, ...(sentBytes > 0 ? { partial_audio: true, action: "discard" } : {}) });
      this.sink.sendJson({ type: "audio.done", ...position, total_bytes: sentBytes, error: message, finish_reason: "error" });
    }
  }

  /** Flow control (async/drain.ts); a client that stopped reading is dropped, which frees its generation state. */
  async #waitForDrain(): Promise<void> {
    const { stallTimeoutMs } = this.options;
    if ((await waitForDrain({ bufferedBytes: () => this.sink.bufferedBytes(), closed: () => this.#closed, stallTimeoutMs })) !== "stalled") return;
    this.options.logger.warn("websocket client stopped reading; closing", { stallTimeoutMs });
    this.sink.close(CLOSE_POLICY, "client stopped reading audio");
    this.closed();
  }

  /**
   * Activity moves the idle deadline without touching the timer, which checks it when it fires: a timer
   * restarted per message would cost a flood of keep-alives a timer each.
   */
  #resetIdle(): void {
    if (this.#closed || !this.#config) return;
    this.#lastActivityMs = performance.now();
    if (!this.#idleTimerArmed) this.#armIdle(this.options.idleTimeoutMs);
  }

  #armIdle(delayMs: number): void {
    this.#idleTimerArmed = true;
    this.#arm(delayMs, () => {
      this.#idleTimerArmed = false;
      const quietMs = performance.now() - this.#lastActivityMs;
      if (quietMs < this.options.idleTimeoutMs) return this.#armIdle(this.options.idleTimeoutMs - quietMs);
      // Not idle while audio is still being made or sent for this client.
      if (this.#working) return this.#resetIdle();
      const seconds = Math.round(this.options.idleTimeoutMs / 1000);
      this.sink.sendJson({ type: "error", message: `idle timeout: no message for ${seconds} s and nothing left to send; the session is closed` });
      this.sink.close(CLOSE_NORMAL, "idle timeout");
      this.closed();
    });
  }

  #arm(delayMs: number, onTimeout: () => void): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(onTimeout, delayMs);
  }

  /** A message the session skips: the client is told, and the session goes on, within its budget of such messages. */
  #reject(message: string): void {
    if (!this.#errorBudget.spend()) return this.#fail(`${ERRONEOUS_MESSAGE_FLOOD}; the session is closed`, CLOSE_POLICY);
    this.sink.sendJson({ type: "error", message });
  }

  #fail(message: string, code: number): void {
    if (this.#closed) return;
    this.sink.sendJson({ type: "error", message });
    this.sink.close(code, message.slice(0, 120));
    this.closed();
  }
}
