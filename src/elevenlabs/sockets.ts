/**
 * ElevenLabs' text-to-speech WebSockets under /elevenlabs: `…/stream-input` (one stream of text per socket)
 * and `…/multi-stream-input` (several, each a context named by `context_id`). Each stream of text is a
 * TextStream (speech/text-stream.ts), the core under our own WebSocket route too, so the segmenting,
 * admission, backpressure, queue caps, idle timeout and cancellation are that route's; this file is a codec
 * over it: ElevenLabs' messages become the stream's calls and its events ElevenLabs' messages (docs/api.md,
 * "ElevenLabs API").
 *
 * Client → server: `{"text": " ", "voice_settings"?, …}` opens a stream (or a context), `{"text": "…",
 * "flush"?, "try_trigger_generation"?}` adds text (a complete sentence is spoken at once; `flush` speaks
 * what is left), `{"text": ""}` ends a stream-input socket (and keeps a context alive), `close_context`
 * and `close_socket` end a context and the socket, as ElevenLabs does: what a context was already asked to
 * flush is still spoken (LiveKit sends its last sentence, an empty flush and close_context at once), then
 * `isFinal`; the rest stops at once (an interruption). Server → client: `{"audio", "isFinal": false,
 * "alignment", "normalizedAlignment", "contextId"?}` with base64 audio; a sentence's alignment comes with its
 * last audio message, its times (ms) counted from the start of that sentence's audio; `{"isFinal": true}` when
 * a stream ends.
 */
import type { Lexicon } from "../text/lexicon.ts";
import type { PronunciationDictionaries } from "./pronunciation.ts";
import type { Context, Hono, MiddlewareHandler } from "hono";
import { z } from "zod";
import { ApiError } from "../api/errors.ts";
import { dictionaryLocatorsSchema, ElevenLabsError, outputFormatOf, parseElevenLabs, type ElevenLabsOutputFormat } from "./schema.ts";
import { TEXT_NORMALIZATION_MODES, type TextNormalizationMode } from "../api/speech.ts";
import { CLOSE_GOING_AWAY, CLOSE_NORMAL, CLOSE_POLICY, closeOf, ERRONEOUS_MESSAGE_FLOOD, ErroneousMessageBudget, MAX_INBOX_BYTES, MAX_TEXT_MESSAGE_BYTES } from "../speech/stream-rules.ts";
import { TextStream, type SpokenSentence, type TextStreamEvents } from "../speech/text-stream.ts";
import { evenCharacterTimes } from "./timed-speech.ts";
import { noteFirstAudio } from "../http/access-log.ts";
import { base64 } from "../http/base64.ts";
import { checkModelId, voiceNamed } from "./routes.ts";
import type { SpeechSpec } from "../speech/service.ts";
import { elevenLabsSpec, SOCKET_SENTENCE } from "./dialect.ts";
import { sessionSocketEvents, type SessionSocket } from "../http/session-socket.ts";
import type { StreamRouteDeps } from "../openai/stream-ws.ts";
import type { VoiceCatalog } from "../voices/catalog.ts";
import type { VoiceStore } from "../voices/store.ts";

export interface ElevenLabsSocketDeps extends StreamRouteDeps {
  voices: VoiceStore;
  catalog: VoiceCatalog;
  dictionaries: PronunciationDictionaries;
  /** For an upgrade that came without a key (auth.ts), the check its first message's key must pass. */
  keyInFirstMessage: (c: Context) => ((key: string) => boolean) | undefined;
}

/** ElevenLabs' limits on inactivity_timeout (seconds) and its default. */
const DEFAULT_INACTIVITY_SECONDS = 20;
const MAX_INACTIVITY_SECONDS = 180;
/** ElevenLabs' cap on open contexts per multi-stream-input socket. */
export const MAX_CONTEXTS = 5;
/**
 * Closed contexts still speaking what they were asked to flush, beside the open ones: an agent interrupted
 * several times in a row opens new contexts before the old ones are done. Past it the oldest stops at once.
 */
export const MAX_CLOSING_CONTEXTS = 5;
/** The longest context_id: ids are echoed in every reply of their context. */
export const MAX_CONTEXT_ID_CHARS = 256;

const socketQuerySchema = z.object({
  model_id: z.string().optional(),
  output_format: z.string().optional(),
  inactivity_timeout: z.coerce.number({ error: "inactivity_timeout must be a number of seconds" }).int("inactivity_timeout must be whole seconds").min(1, `inactivity_timeout must be from 1 to ${MAX_INACTIVITY_SECONDS}`).max(MAX_INACTIVITY_SECONDS, `inactivity_timeout must be from 1 to ${MAX_INACTIVITY_SECONDS}`).optional(),
  language_code: z.string().optional(),
  seed: z.coerce.number({ error: "seed must be an integer" }).int("seed must be an integer").min(0).max(4294967295).optional(),
  apply_text_normalization: z.enum(TEXT_NORMALIZATION_MODES, { error: `apply_text_normalization must be one of ${TEXT_NORMALIZATION_MODES.join(", ")}` }).optional(),
});

/** The client messages of both sockets; fields ElevenLabs defines and no model here uses are accepted and ignored. */
const clientMessageSchema = z.looseObject({
  text: z.string({ error: "text must be a string" }).optional(),
  flush: z.boolean({ error: "flush must be a boolean" }).nullish(),
  try_trigger_generation: z.boolean().nullish(),
  context_id: z.string({ error: "context_id must be a string" }).max(MAX_CONTEXT_ID_CHARS, `context_id must be at most ${MAX_CONTEXT_ID_CHARS} characters`).nullish(),
  contextId: z.string({ error: "contextId must be a string" }).max(MAX_CONTEXT_ID_CHARS, `contextId must be at most ${MAX_CONTEXT_ID_CHARS} characters`).nullish(),
  close_context: z.boolean({ error: "close_context must be a boolean" }).nullish(),
  close_socket: z.boolean({ error: "close_socket must be a boolean" }).nullish(),
  xi_api_key: z.string().nullish(),
  "xi-api-key": z.string().nullish(),
  authorization: z.string().nullish(),
  pronunciation_dictionary_locators: dictionaryLocatorsSchema.nullish(),
});
type ClientMessage = z.infer<typeof clientMessageSchema>;

/** The key a first message carries: `xi_api_key` (multi-stream-input), `xi-api-key` (stream-input) or a bearer `authorization`. */
function keyOf(message: ClientMessage): string | undefined {
  const bearer = message.authorization ? /^bearer[ \t]+(\S+)[ \t]*$/i.exec(message.authorization)?.[1] : undefined;
  return message.xi_api_key ?? message["xi-api-key"] ?? bearer ?? undefined;
}

interface SocketSettings {
  voice: string;
  format: ElevenLabsOutputFormat;
  inactivityMs: number;
  language?: string;
  seed?: number;
  textNormalization?: TextNormalizationMode;
  /** The rules of the pronunciation_dictionary_locators the stream (or context) was opened with. */
  lexicon?: Lexicon;
}

export function registerElevenLabsSocketRoutes(app: Hono, deps: ElevenLabsSocketDeps): void {
  const settingsOf = new WeakMap<Request, SocketSettings>();
  // Everything that depends only on the URL is checked before the upgrade, so a bad voice or format is an
  // HTTP error in ElevenLabs' shape rather than a socket that opens and closes.
  const checkUrl: MiddlewareHandler = async (c, next) => {
    const query = parseElevenLabs(socketQuerySchema, c.req.query(), "query");
    checkModelId(deps.openai, query.model_id);
    const voiceId = c.req.param("voice_id") ?? "";
    settingsOf.set(c.req.raw, {
      // A caller whose key is still to come learns nothing about the voices: its socket's session checks the
      // voice once the key has passed, and refuses an unknown one with an error message.
      voice: deps.keyInFirstMessage(c) ? voiceId.trim().toLowerCase() : await voiceNamed(deps.catalog, voiceId),
      format: outputFormatOf(query.output_format),
      inactivityMs: (query.inactivity_timeout ?? DEFAULT_INACTIVITY_SECONDS) * 1000,
      language: query.language_code,
      seed: query.seed,
      textNormalization: query.apply_text_normalization,
    });
    await next();
  };
  for (const [path, mode] of [
    ["/elevenlabs/v1/text-to-speech/:voice_id/stream-input", "single"],
    ["/elevenlabs/v1/text-to-speech/:voice_id/multi-stream-input", "multi"],
  ] as const) {
    app.get(path, checkUrl, deps.runtime.upgradeWebSocket((c) => socketEvents(c, deps, settingsOf.get(c.req.raw)!, mode)));
  }
}

function socketEvents(c: Context, deps: ElevenLabsSocketDeps, settings: SocketSettings, mode: "single" | "multi") {
  return sessionSocketEvents(c, deps, (socket) => new ElevenLabsSocket(deps.keyInFirstMessage(c), messageSink(c, socket), deps, settings, mode));
}

/** ElevenLabs' messages onto the socket as JSON text; the first with audio marks the access log's time to first audio. */
function messageSink(c: Context, socket: SessionSocket): SocketSink {
  return {
    send: (message) => {
      if (typeof message.audio === "string" && message.audio.length > 0) noteFirstAudio(c);
      socket.send(JSON.stringify(message));
    },
    bufferedBytes: () => socket.bufferedBytes(),
    close: (code, reason) => socket.close(code, reason),
  };
}

interface SocketSink {
  send(message: Record<string, unknown>): void;
  bufferedBytes(): number;
  close(code: number, reason: string): void;
}

/** ElevenLabs' WebSocket alignment: characters with start times and durations in whole milliseconds. */
interface SocketAlignment {
  chars: string[];
  charStartTimesMs: number[];
  charDurationsMs: number[];
}

/** One stream of text: the core's stream, and what its sentence in progress has sent. */
class ContextStream {
  /** What the model reads of the sentence being spoken. */
  #spokenText: string | undefined;
  readonly #stream: TextStream<SocketSettings>;
  /** For each end of an utterance asked for, whether it ends the stream (stream-input's `{"text": ""}`) or only flushes. */
  readonly #pendingDone: ("flush" | "end")[] = [];
  /** close_context (or close_socket) came while text was still being flushed: the stream ends once it is spoken. */
  #closing = false;
  /** The sentence's latest audio, held back so its last message can carry the sentence's alignment. */
  #held: Uint8Array | undefined;
  #ended = false;

  constructor(
    private readonly owner: ElevenLabsSocket,
    private readonly contextId: string | null,
    settings: SocketSettings,
    deps: ElevenLabsSocketDeps,
  ) {
    const { service, catalog } = deps;
    this.#stream = new TextStream<SocketSettings>(this.#events(), {
      speak: async (text, { voice: name, format, language, seed, textNormalization, lexicon }, signal) => {
        let spec: SpeechSpec;
        try {
          // Each sentence reads the voice as the folder holds it now (replicas share it).
          const voice = await catalog.resolve({ name }, { uploads: true }, signal);
          spec = elevenLabsSpec({ text, format, seed, languageCode: language, normalization: textNormalization, lexicon }, voice);
        } catch (error) {
          throw service.refused(SOCKET_SENTENCE.mode, signal, error);
        }
        return service.start(spec, SOCKET_SENTENCE, signal);
      },
      holdPlace: (signal) => service.holdPlace(signal),
      logger: deps.logger,
      markdown: service.markdownReading,
      configTimeoutMs: deps.config.wsConfigTimeoutSeconds * 1000,
      idleTimeoutMs: settings.inactivityMs,
      maxQueuedSegments: deps.config.wsMaxQueuedSegments,
      maxQueuedChars: deps.config.wsMaxQueuedChars,
      maxInputChars: service.maxInputChars,
      maxInboxBytes: MAX_INBOX_BYTES,
      stallTimeoutMs: deps.config.streamStallTimeoutSeconds * 1000,
      endWhenFull: true,
    });
    this.#stream.handleInOrder(0, async () => {
      try {
        // Everything a sentence would be refused for (the voice, the format's rate), found before any text.
        service.checkOutput(settings.format.responseFormat, settings.format.sampleRateHz, service.model().capabilities);
        await catalog.check(settings.voice, { uploads: true });
      } catch (error) {
        if (error instanceof ApiError && error.status < 500) return this.#stream.fail("invalid", error.message);
        throw error;
      }
      this.#stream.configure(settings);
    });
  }

  text(text: string): void {
    const byteLength = Buffer.byteLength(text);
    this.#stream.handleInOrder(byteLength, () => {
      if (byteLength > MAX_TEXT_MESSAGE_BYTES) return this.#stream.fail("too_big", `text is larger than 128 KiB (${MAX_TEXT_MESSAGE_BYTES} bytes)`);
      this.#stream.activity();
      this.#stream.text(text);
    });
  }

  /** Speaks what is buffered now; `end` also ends the stream once its audio has gone. */
  done(kind: "flush" | "end"): void {
    this.#pendingDone.push(kind);
    this.#stream.handleInOrder(0, () => {
      this.#stream.activity();
      this.#stream.end();
    });
  }

  /** A message that names this stream and carries nothing to speak keeps it from the inactivity timeout. */
  keepAlive(): void {
    this.#stream.activity();
  }

  /** Whether text it was asked to flush (or end) is still being spoken. */
  get flushing(): boolean {
    return this.#pendingDone.length > 0;
  }

  /** Takes no more text: what was flushed is spoken, then the owner hears streamFinished. */
  closeAfterFlush(): void {
    this.#closing = true;
  }

  /** The server is shutting down: what was flushed is spoken, then the stream ends (going away). */
  drain(): void {
    this.#stream.drain();
  }

  /** Stops generation and frees the stream. */
  stop(): void {
    this.#ended = true;
    this.#stream.closed();
  }

  get ended(): boolean {
    return this.#ended;
  }

  #events(): TextStreamEvents {
    return {
      sentenceStart: (_sentence, speech) => {
        this.#held = undefined;
        this.#spokenText = speech.prepared.job.text;
      },
      audio: (bytes) => {
        if (this.#held) this.#sendAudio(this.#held, null);
        this.#held = bytes;
      },
      sentenceDone: (sentence: SpokenSentence, end) => this.#sendHeld(sentenceAlignment(sentence.text, end.audioSeconds), sentenceAlignment(this.#spokenText ?? sentence.text, end.audioSeconds)),
      sentenceFailed: (_sentence, error) => {
        this.owner.send({ message: error.message, error: error.kind === "at_capacity" ? "too_many_concurrent_requests" : "invalid_request", code: error.kind === "at_capacity" ? 429 : CLOSE_POLICY }, this.contextId);
        this.#sendHeld(null);
      },
      utteranceDone: () => {
        if (this.#pendingDone.shift() === "end" || (this.#closing && !this.flushing)) this.owner.streamFinished(this);
      },
      ended: (ending) => {
        const { message, code, reason } = closeOf(ending);
        if (message !== undefined) this.owner.send({ message, error: "invalid_request", code: CLOSE_POLICY }, this.contextId);
        this.owner.streamClosed(this, code, reason);
      },
      bufferedBytes: () => this.owner.bufferedBytes(),
    };
  }

  /** The sentence's last audio (none when everything was sent), with its alignment when it was spoken whole. */
  #sendHeld(alignment: SocketAlignment | null, normalizedAlignment: SocketAlignment | null = alignment): void {
    if (this.#held || alignment) this.#sendAudio(this.#held ?? new Uint8Array(0), alignment, normalizedAlignment);
    this.#held = undefined;
  }

  /** `normalizedAlignment` is over the text as the model read it (markdown read, normalized). */
  #sendAudio(bytes: Uint8Array, alignment: SocketAlignment | null, normalizedAlignment: SocketAlignment | null = alignment): void {
    this.owner.send({ audio: base64(bytes), isFinal: false, alignment, normalizedAlignment }, this.contextId);
  }
}

/**
 * The sentence's characters and a space (the words of the next sentence start after it), its audio spread
 * over them in equal shares: no model here says when each character is spoken (docs/api.md).
 */
function sentenceAlignment(sentence: string, audioSeconds: number): SocketAlignment {
  const chars = [...Array.from(sentence), " "];
  const spokenChars = chars.length - 1;
  const timesMs = evenCharacterTimes(spokenChars, 0, audioSeconds * 1000);
  const startOf = (index: number) => Math.round(timesMs[Math.min(index, spokenChars)]!);
  return {
    chars,
    charStartTimesMs: chars.map((_, index) => startOf(index)),
    charDurationsMs: chars.map((_, index) => startOf(index + 1) - startOf(index)),
  };
}

/** One ElevenLabs socket: its streams of text (one, or one per context) and the messages between them. */
class ElevenLabsSocket {
  /** The open streams: stream-input's one (under null), or multi-stream-input's contexts by id. */
  readonly #streams = new Map<string | null, ContextStream>();
  /** Closed contexts still speaking what they were asked to flush, oldest first (insertion order). */
  readonly #closingContexts = new Map<string | null, ContextStream>();
  readonly #errorBudget = new ErroneousMessageBudget();
  #opened = false;
  #closed = false;
  /** close_socket came: the socket closes once the closing contexts are done; later messages are ignored. */
  #closingSocket = false;
  /** The server is shutting down: each context finishes what it had flushed, and the socket closes (1001) after the last. */
  #draining = false;
  /** Until the first message shows a key, when the upgrade came without one; nothing is spoken before. */
  #keyCheck: ((key: string) => boolean) | undefined;
  #keyDeadline: ReturnType<typeof setTimeout> | undefined;

  constructor(
    keyCheck: ((key: string) => boolean) | undefined,
    private readonly sink: SocketSink,
    private readonly deps: ElevenLabsSocketDeps,
    private readonly settings: SocketSettings,
    private readonly mode: "single" | "multi",
  ) {
    this.#keyCheck = keyCheck;
    if (keyCheck) this.#keyDeadline = setTimeout(() => this.#refuseKey("the first message must arrive, with xi_api_key, within the configuration deadline"), deps.config.wsConfigTimeoutSeconds * 1000);
  }

  bufferedBytes(): number {
    return this.sink.bufferedBytes();
  }

  /** A message to the client; in multi-stream-input it names its context. */
  send(message: Record<string, unknown>, contextId: string | null): void {
    if (this.#closed) return;
    this.sink.send(this.mode === "multi" ? { ...message, contextId } : message);
  }

  receive(data: string | ArrayBuffer): void {
    if (this.#closed || this.#closingSocket) return;
    if (typeof data !== "string") return this.#fail("binary messages are not part of the protocol; send JSON text");
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      return this.#fail("message is not valid JSON");
    }
    const parsed = clientMessageSchema.safeParse(json);
    if (!parsed.success) return this.#fail(parsed.error.issues[0]!.message);
    if (this.#keyCheck) {
      const key = keyOf(parsed.data);
      if (key === undefined || !this.#keyCheck(key)) return this.#refuseKey(key === undefined ? "Missing API key (send the xi-api-key header, or xi_api_key in the first message)" : "Wrong API key");
      this.#keyCheck = undefined;
      clearTimeout(this.#keyDeadline);
    }
    if (this.mode === "single") this.#receiveSingle(parsed.data);
    else this.#receiveMulti(parsed.data);
  }

  /** The rules of a message's pronunciation_dictionary_locators (read when it opens a stream or context); false after a refusal. */
  #lexiconOf(message: ClientMessage, contextId: string | null): Lexicon | undefined | false {
    try {
      return this.deps.dictionaries.lexiconFor(message.pronunciation_dictionary_locators ?? undefined);
    } catch (error) {
      if (!(error instanceof ElevenLabsError)) throw error;
      if (this.mode === "single") this.#fail(error.message);
      else this.#reject(error.message, contextId);
      return false;
    }
  }

  #receiveSingle(message: ClientMessage): void {
    let stream = this.#streams.get(null);
    if (!stream) {
      const lexicon = this.#lexiconOf(message, null);
      if (lexicon === false) return;
      stream = this.#openStream(null, lexicon);
    }
    if (message.text === undefined) return this.#fail("text is required");
    // Every message counts as activity, ElevenLabs' keep-alive ({"text": " "}) included.
    stream.keepAlive();
    // The first message opens the stream (ElevenLabs sends a single space); any text in it is text.
    const opening = !this.#opened;
    this.#opened = true;
    if (message.text === "" && !opening) return stream.done("end");
    if (message.text.trim() !== "") stream.text(message.text);
    if (message.flush) stream.done("flush");
  }

  #receiveMulti(message: ClientMessage): void {
    if (message.close_socket) return this.#closeSocketAfterFlush();
    const contextId = message.context_id ?? message.contextId ?? null;
    const existing = this.#streams.get(contextId);
    if (!existing && this.#closingContexts.has(contextId)) {
      // A closed context only finishes what it had flushed: a keep-alive or a second close_context is harmless.
      if (message.close_context || (!message.flush && (message.text ?? "").trim() === "")) return;
      return this.#reject(`context '${contextId}' is closed and only finishes what it was asked to flush; send more text in a new context`, contextId);
    }
    if (message.close_context) {
      if (!existing) return this.#reject(`no context '${contextId ?? ""}' is open`, contextId);
      this.#streams.delete(contextId);
      this.#closeContext(contextId, existing);
      return this.#closeOnceDone();
    }
    // Any message naming a context is activity on it, ElevenLabs' keep-alive ({"text": "", "context_id"}) included.
    existing?.keepAlive();
    if (message.text === "" && !message.flush) return;
    let stream = existing;
    if (!stream) {
      const lexicon = this.#lexiconOf(message, contextId);
      if (lexicon === false) return;
      stream = this.#openContext(contextId, lexicon);
    }
    if (!stream) return;
    if (message.text !== undefined && message.text.trim() !== "") stream.text(message.text);
    if (message.flush) stream.done("flush");
  }

  #openContext(contextId: string | null, lexicon?: Lexicon): ContextStream | undefined {
    if (this.#streams.size >= MAX_CONTEXTS) {
      this.#reject(`at most ${MAX_CONTEXTS} contexts may be open on one socket; close one first`, contextId, "max_active_conversations");
      return undefined;
    }
    return this.#openStream(contextId, lexicon);
  }

  #openStream(contextId: string | null, lexicon?: Lexicon): ContextStream {
    const stream = new ContextStream(this, contextId, lexicon ? { ...this.settings, lexicon } : this.settings, this.deps);
    this.#streams.set(contextId, stream);
    return stream;
  }

  /**
   * close_context, as ElevenLabs serves it: a context with text still being flushed speaks it and then sends
   * isFinal; one without stops at once (an interruption) and sends isFinal now.
   */
  #closeContext(contextId: string | null, stream: ContextStream): void {
    if (!stream.flushing) {
      stream.stop();
      return this.send({ isFinal: true }, contextId);
    }
    stream.closeAfterFlush();
    this.#closingContexts.set(contextId, stream);
    if (this.#closingContexts.size > MAX_CLOSING_CONTEXTS) {
      const [oldestId, oldest] = this.#closingContexts.entries().next().value!;
      this.#finishContext(oldestId, oldest);
    }
  }

  /** close_socket: every context closes as by close_context, and the socket once the last has finished. */
  #closeSocketAfterFlush(): void {
    this.#closingSocket = true;
    const open = [...this.#streams];
    this.#streams.clear();
    for (const [contextId, stream] of open) this.#closeContext(contextId, stream);
    this.#closeOnceDone();
  }

  #finishContext(contextId: string | null, stream: ContextStream): void {
    this.#closingContexts.delete(contextId);
    stream.stop();
    this.send({ isFinal: true }, contextId);
    this.#closeOnceDone();
  }

  /** After a context ends: close_socket, or a shutdown, closes the socket once no context is left speaking. */
  #closeOnceDone(): void {
    if (this.#closingContexts.size > 0) return;
    if (this.#closingSocket) this.#closeSocket(CLOSE_NORMAL, "close_socket");
    else if (this.#draining && this.#streams.size === 0) this.#closeSocket(CLOSE_GOING_AWAY, "server shutting down");
  }

  /** A stream has spoken everything it owed: stream-input's `{"text": ""}` (the socket closes) or a closed context's flush. */
  streamFinished(stream: ContextStream): void {
    for (const [contextId, closing] of this.#closingContexts) if (closing === stream) return this.#finishContext(contextId, stream);
    this.send({ isFinal: true }, null);
    stream.stop();
    this.#closeSocket(CLOSE_NORMAL, "stream finished");
  }

  /**
   * A session closes itself: its idle timeout (1000), the end of a shutdown's drain (1001) or a broken rule
   * (1008). In multi-stream-input one context idle just ends, and one drained sends its isFinal, the socket
   * closing after the last; anything else ends the socket, as it does on our own WebSocket.
   */
  streamClosed(stream: ContextStream, code: number, reason: string): void {
    if (stream.ended) return;
    if (this.mode === "multi" && (code === CLOSE_NORMAL || code === CLOSE_GOING_AWAY)) {
      const drained = code === CLOSE_GOING_AWAY;
      for (const [contextId, open] of this.#streams) {
        if (open !== stream) continue;
        this.#streams.delete(contextId);
        if (drained) this.send({ isFinal: true }, contextId);
      }
      for (const [contextId, closing] of this.#closingContexts) if (closing === stream) return this.#finishContext(contextId, stream);
      stream.stop();
      return this.#closeOnceDone();
    }
    this.#closeSocket(code, reason);
  }

  drain(): void {
    this.#draining = true;
    const streams = [...this.#streams.values(), ...this.#closingContexts.values()];
    for (const stream of streams) stream.drain();
    if (streams.length === 0) this.#closeSocket(CLOSE_GOING_AWAY, "server shutting down");
  }

  goAway(): void {
    this.#closeSocket(CLOSE_GOING_AWAY, "server shutting down");
  }

  /** The socket closed (either side): every stream stops. */
  closed(): void {
    this.#closed = true;
    clearTimeout(this.#keyDeadline);
    for (const stream of [...this.#streams.values(), ...this.#closingContexts.values()]) stream.stop();
    this.#streams.clear();
    this.#closingContexts.clear();
  }

  #refuseKey(message: string): void {
    this.send({ message, error: "invalid_api_key", code: CLOSE_POLICY }, null);
    this.#closeSocket(CLOSE_POLICY, message.slice(0, 120));
  }

  /** A mistake the socket answers and survives, within its budget of them; past it the socket closes (1008). */
  #reject(message: string, contextId: string | null, error = "invalid_request"): void {
    if (!this.#errorBudget.spend()) return this.#fail(`${ERRONEOUS_MESSAGE_FLOOD}; the socket is closed`);
    this.send({ message, error, code: CLOSE_POLICY }, contextId);
  }

  #fail(message: string): void {
    this.send({ message, error: "invalid_request", code: CLOSE_POLICY }, null);
    this.#closeSocket(CLOSE_POLICY, message.slice(0, 120));
  }

  #closeSocket(code: number, reason: string): void {
    if (this.#closed) return;
    this.sink.close(code, reason);
    this.closed();
  }
}

import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { documentedOutputFormat, elevenLabsErrorResponses, elevenLabsSecurity, voiceIdParams } from "./routes.ts";

/** Each socket as the GET that upgrades (101): OpenAPI has no WebSocket operation. */
export function describeElevenLabsSocketRoutes(registry: OpenAPIRegistry): void {
  const socketQuery = z.object({
    model_id: z.string().optional(),
    output_format: documentedOutputFormat.optional(),
    inactivity_timeout: z.number().int().min(1).max(MAX_INACTIVITY_SECONDS).optional().describe(`seconds without a message before a stream closes (default ${DEFAULT_INACTIVITY_SECONDS})`),
    xi_api_key: z.string().optional().describe("the API key, for clients that cannot set headers"),
  });
  for (const [path, summary] of [
    ["/elevenlabs/v1/text-to-speech/{voice_id}/stream-input", 'ElevenLabs WebSocket: {"text": " "} opens, text (flush) in, {"text": ""} ends; {audio, isFinal, alignment, normalizedAlignment} out'],
    ["/elevenlabs/v1/text-to-speech/{voice_id}/multi-stream-input", "ElevenLabs WebSocket: several streams by context_id, flush, close_context, close_socket; audio messages carry contextId"],
  ] as const) {
    registry.registerPath({
      method: "get",
      path,
      summary,
      security: [...elevenLabsSecurity, { xiApiKeyQuery: [] }],
      request: { params: voiceIdParams, query: socketQuery },
      responses: { 101: { description: "switched to the WebSocket protocol" }, ...elevenLabsErrorResponses(400, 401, 404, 422, 503) },
    });
  }
}
