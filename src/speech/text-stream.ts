/**
 * A stream of text spoken sentence by sentence, protocol-free: text arrives in pieces, every complete segment
 * is spoken at once, and its audio leaves in order, utterance after utterance. The socket protocols (the
 * native WebSocket, ElevenLabs' sockets) are codecs over it: they turn their messages into the typed calls
 * below and the typed events back into their messages, so the caps, the ordered speak loop, flow control, the
 * idle timeout and the drain on shutdown are written once, here. Wyoming speaks each request's text through
 * it too, keeping its connection's own inbox, idle time and drain (wyoming/session.ts).
 *
 * Messages are handled one at a time in arrival order (`handleInOrder`: a configuration check may await),
 * and sentences are spoken one at a time by a loop of their own, so a later configuration applies only to
 * text that arrives after it. Each sentence is spoken through the function the codec gives (`speak`), with
 * the settings in force when its text arrived.
 */
import { waitForDrain } from "../async/drain.ts";
import { SerialQueue } from "../async/serial-queue.ts";
import { EngineFullError } from "../engine/errors.ts";
import { asApiError } from "./errors.ts";
import type { Logger } from "../log/logger.ts";
import { TextSegmenter, type SplitGranularity } from "../text/segmenter.ts";
import { MarkdownReader, type MarkdownReadingOptions } from "../text/markdown.ts";
import type { SpeechEnd, StartedSpeech } from "./service.ts";

/** Each message also counts this, what holding it costs beyond its bytes, so a flood of tiny ones is bounded too. */
const INBOX_MESSAGE_OVERHEAD_BYTES = 256;

/** Where a sentence stands: its utterance (counted from 0 per stream) and its place in that utterance. */
export interface SentencePosition {
  utteranceIndex: number;
  sentenceIndex: number;
}

export interface SpokenSentence extends SentencePosition {
  text: string;
}

/**
 * Why the stream refuses something, for a codec to put in its own shape: a broken rule (`invalid`), text past
 * a cap (`too_big`), a full engine (`at_capacity`, the sentence may be sent again after retryAfterSeconds)
 * or a failure of ours (`failed`).
 */
export interface TextStreamError {
  kind: "invalid" | "too_big" | "at_capacity" | "failed";
  message: string;
  retryAfterSeconds?: number;
  /** A sentence's error as thrown, for a codec whose wire shape says more (Wyoming's status and field). */
  cause?: unknown;
}

/**
 * How a stream ended by itself: it finished (close), the server drained it (shutdown), nothing happened for
 * the idle timeout, its client stopped reading audio, no settings came in time, or a rule was broken.
 */
export type TextStreamEnding =
  | { kind: "finished" | "going_away" | "stalled" | "unconfigured" }
  | { kind: "at_capacity"; retryAfterSeconds: number }
  | { kind: "idle"; idleSeconds: number }
  | { kind: "broken"; error: TextStreamError };

/** What the stream tells its codec, in order. */
export interface TextStreamEvents {
  sentenceStart(sentence: SpokenSentence, speech: StartedSpeech): void;
  audio(bytes: Uint8Array, sentence: SpokenSentence): void;
  sentenceDone(sentence: SpokenSentence, end: SpeechEnd & { totalBytes: number; ignoredFields: readonly string[] }): void;
  /** The sentence was refused or failed; `sentBytes` of its audio had already gone. The stream goes on. */
  sentenceFailed(sentence: SpokenSentence, error: TextStreamError, sentBytes: number): void;
  /** Everything before an `end()` has been spoken. */
  utteranceDone(utteranceIndex: number, totalSentences: number): void;
  /** The stream ended by itself; the codec closes its transport. `closed()` follows. */
  ended(ending: TextStreamEnding): void;
  /** Bytes sent to the client and not yet taken: flow control's signal. */
  bufferedBytes(): number;
}

export interface TextStreamOptions<Settings> {
  /**
   * How markdown is read, before the text is cut into sentences: a code fence or a list item's start spans
   * pieces and sentences, so it is read from the stream as it arrives. Undefined: spoken as sent.
   */
  markdown?: MarkdownReadingOptions;
  /** Speaks one sentence with the settings in force when its text arrived. */
  speak(text: string, settings: Settings, signal: AbortSignal): Promise<StartedSpeech>;
  /**
   * Holds a running place for the sentence `speak` is about to be called for (with `signal`), or throws the
   * refusal now (SpeechService.holdPlace): a full server refuses the sentence before it is read. Released
   * once the sentence has been spoken or has failed.
   */
  holdPlace?(signal: AbortSignal): { release(): void };
  logger: Logger;
  /** How long the first settings may take before the stream ends (`unconfigured`); none where they come with the stream. */
  configTimeoutMs?: number;
  /** How long a stream may go without activity and with nothing to send; none where the codec keeps that time itself (a Wyoming connection outlives its runs). */
  idleTimeoutMs?: number;
  /** Most segments waiting to be spoken (and, counted apart, utterance ends); beyond it the stream breaks. */
  maxQueuedSegments: number;
  /** Most characters of text waiting to be spoken (queued segments plus the unfinished one). */
  maxQueuedChars: number;
  /** One text's cap (service.maxInputChars): text buffered without a segment end may not pass it. */
  maxInputChars: number;
  /** Bytes of messages waiting to be handled before the stream breaks. */
  maxInboxBytes: number;
  /** How long a client may read nothing while audio waits for it before the stream is dropped. */
  stallTimeoutMs: number;
  /**
   * A sentence the engine has no place for ends the stream (`at_capacity`) once its refusal is told: a
   * socket's client then reconnects, which a load balancer can send to another replica. Otherwise (a
   * Wyoming connection, which outlives its runs) the stream goes on.
   */
  endWhenFull?: boolean;
}

type WorkItem<Settings> = { kind: "segment"; sentence: SpokenSentence; settings: Settings } | { kind: "utterance-end"; utteranceIndex: number; totalSentences: number };

export class TextStream<Settings> {
  #settings: Settings | undefined;
  #segmenter = new TextSegmenter("sentence");
  #markdown: MarkdownReader | undefined;
  #granularity: SplitGranularity = "sentence";
  #utteranceIndex = 0;
  #sentenceIndex = 0;
  readonly #work: WorkItem<Settings>[] = [];
  /** Characters of the segments in #work. */
  #queuedChars = 0;
  #working = false;
  /** close() came (or the server is shutting down): finish the queued work, then end. */
  #closing = false;
  #closingKind: "finished" | "going_away" = "finished";
  readonly #inbox = new SerialQueue();
  /** Bytes of the messages in #inbox (with their overhead), bounded by maxInboxBytes. */
  #inboxBytes = 0;
  readonly #abort = new AbortController();
  #closed = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Whether #timer is the idle timer (else the configuration deadline, or none). */
  #idleTimerArmed = false;
  /** Callers of spoken() waiting for the queue to empty. */
  #spokenWaiters: (() => void)[] = [];
  /** The last activity (performance.now()): the idle timer checks it when it fires. */
  #lastActivityMs = 0;

  constructor(
    private readonly events: TextStreamEvents,
    private readonly options: TextStreamOptions<Settings>,
  ) {
    if (options.configTimeoutMs !== undefined) this.#arm(options.configTimeoutMs, () => this.#end({ kind: "unconfigured" }));
  }

  /** Whether the stream takes no more input: it ended, or it is finishing what it has. */
  get accepting(): boolean {
    return !this.#closed && !this.#closing;
  }

  /** Whether the stream has ended: closed by its transport, or ended by itself. */
  get ended(): boolean {
    return this.#closed;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** Where the next segment will stand. */
  get nextPosition(): SentencePosition {
    return { utteranceIndex: this.#utteranceIndex, sentenceIndex: this.#sentenceIndex };
  }

  /**
   * Segments, utterance ends and characters waiting (what the queue caps bound). Each utterance end is an
   * utteranceDone still to send: the segment cap bounds them too, counted on their own, so a flood of empty
   * end() cannot grow the queue without bound.
   */
  get queued(): { segments: number; utteranceEnds: number; chars: number } {
    const segments = this.#work.filter((item) => item.kind === "segment").length;
    return { segments, utteranceEnds: this.#work.length - segments, chars: this.#queuedChars };
  }

  /**
   * A message of `wireBytes`, handled after those before it. The bytes waiting are capped; a handler that
   * throws is a fault of ours and breaks the stream.
   */
  handleInOrder(wireBytes: number, handle: () => void | Promise<void>): void {
    if (!this.accepting) return;
    const cost = wireBytes + INBOX_MESSAGE_OVERHEAD_BYTES;
    this.#inboxBytes += cost;
    if (this.#inboxBytes > this.options.maxInboxBytes) {
      return this.fail("invalid", `more than ${this.options.maxInboxBytes} bytes of messages are waiting to be handled; wait for the server's answers before sending more`);
    }
    void this.#inbox
      .run(() => (this.accepting ? handle() : undefined))
      .catch((error) => {
        this.options.logger.error("text stream message handling failed", { error: String(error) });
        this.fail("invalid", "internal error");
      })
      .finally(() => {
        this.#inboxBytes -= cost;
      });
  }

  /**
   * Settings for the text that arrives from now on. Text already buffered under another granularity keeps its
   * place in line, spoken with the settings it arrived under; so does `carriedText`, text the codec held apart
   * (uncommitted text), which joins the new segmenter first.
   */
  configure(settings: Settings, granularity: SplitGranularity = "sentence", carriedText = ""): void {
    if (!this.#settings || granularity !== this.#granularity) {
      const pending = this.#segmenter.flush().join(" ");
      this.#segmenter = new TextSegmenter(granularity);
      this.#granularity = granularity;
      if (pending) for (const text of this.#segmenter.push(pending + " ")) this.#enqueueSegment(text);
    }
    if (carriedText) for (const text of this.#segmenter.push(carriedText)) this.#enqueueSegment(text);
    this.#settings = settings;
    this.activity();
  }

  /** More text: every segment it completes is queued to be spoken. */
  text(chunk: string): void {
    this.#markdown ??= this.options.markdown ? new MarkdownReader(this.options.markdown) : undefined;
    const read = this.#markdown ? this.#markdown.push(chunk) : chunk;
    for (const text of this.#segmenter.push(read)) {
      this.#enqueueSegment(text);
      if (this.#overQueueCap()) return;
    }
    // With split granularity "none" everything waits for end(), to be spoken as one text: it has one text's cap.
    if (this.#segmenter.pendingLength + (this.#markdown?.pendingLength ?? 0) > this.options.maxInputChars) {
      return this.fail("too_big", `more than ${this.options.maxInputChars} characters are buffered without a segment end; send input.done sooner`);
    }
    this.#overQueueCap();
  }

  /** One whole sentence, however it is punctuated: the segmenter is passed by. */
  sentence(text: string): void {
    this.#enqueueSegment(text);
    this.#overQueueCap();
  }

  /** Resolves once everything queued has been spoken (at once when nothing is), or the stream has ended. */
  spoken(): Promise<void> {
    if (this.#closed || (!this.#working && this.#work.length === 0)) return Promise.resolve();
    return new Promise((resolve) => this.#spokenWaiters.push(resolve));
  }

  /** Ends the utterance: what is buffered is spoken, then utteranceDone. */
  end(): void {
    const held = this.#markdown?.flush() ?? "";
    for (const text of [...(held ? this.#segmenter.push(held) : []), ...this.#segmenter.flush()]) {
      this.#enqueueSegment(text);
      if (this.#overQueueCap()) return;
    }
    this.#enqueue({ kind: "utterance-end", utteranceIndex: this.#utteranceIndex, totalSentences: this.#sentenceIndex });
    this.#utteranceIndex++;
    this.#sentenceIndex = 0;
    this.#overQueueCap();
  }

  /** Takes no more input: what end() flushed is finished first, text never flushed is dropped, then the stream ends (`finished`). */
  close(): void {
    this.#closing = true;
    if (!this.#working) this.#endNormally();
  }

  /**
   * The server is shutting down: as close(), ending `going_away`; later messages are ignored.
   */
  drain(): void {
    if (this.#closed) return;
    this.#closing = true;
    this.#closingKind = "going_away";
    if (!this.#working) this.#endNormally();
  }

  /**
   * A message with nothing to speak still shows the client is there (ElevenLabs' keep-alives, any valid
   * message): the idle timeout starts again.
   */
  activity(): void {
    if (this.#closed || !this.#settings || this.options.idleTimeoutMs === undefined) return;
    this.#lastActivityMs = performance.now();
    if (!this.#idleTimerArmed) this.#armIdle(this.options.idleTimeoutMs);
  }

  /** A rule is broken: the stream ends (`broken`). */
  fail(kind: TextStreamError["kind"], message: string): void {
    this.#end({ kind: "broken", error: { kind, message } });
  }

  /** The transport closed (either side): stop generation, free everything. */
  closed(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#abort.abort();
    this.#work.length = 0;
    this.#queuedChars = 0;
    this.#segmenter = new TextSegmenter("sentence");
    this.#markdown = undefined;
    this.#settleSpoken();
  }

  #settleSpoken(): void {
    for (const resolve of this.#spokenWaiters.splice(0)) resolve();
  }

  /** Ends the stream by itself: its codec hears why first, then everything stops. */
  #end(ending: TextStreamEnding): void {
    if (this.#closed) return;
    this.events.ended(ending);
    this.closed();
  }

  #endNormally(): void {
    this.#end({ kind: this.#closingKind });
  }

  /** Breaks the stream when its queue passes a cap; true when it did. */
  #overQueueCap(): boolean {
    const { maxQueuedSegments, maxQueuedChars } = this.options;
    const waitingChars = this.#queuedChars + this.#segmenter.pendingLength + (this.#markdown?.pendingLength ?? 0);
    const { segments, utteranceEnds } = this.queued;
    if (segments <= maxQueuedSegments && utteranceEnds <= maxQueuedSegments && waitingChars <= maxQueuedChars) return false;
    this.fail(
      "invalid",
      `too much text is waiting to be spoken (at most ${maxQueuedSegments} segments, ${maxQueuedSegments} utterance ends and ${maxQueuedChars} characters may be queued); wait for audio.done and session.done before sending more`,
    );
    return true;
  }

  #enqueueSegment(text: string): void {
    this.#queuedChars += text.length;
    const sentence = { text, utteranceIndex: this.#utteranceIndex, sentenceIndex: this.#sentenceIndex++ };
    this.#enqueue({ kind: "segment", sentence, settings: this.#settings! });
  }

  #enqueue(item: WorkItem<Settings>): void {
    this.#work.push(item);
    if (!this.#working) void this.#speakQueued();
  }

  async #speakQueued(): Promise<void> {
    this.#working = true;
    try {
      for (let item = this.#work.shift(); item && !this.#closed; item = this.#work.shift()) {
        if (item.kind === "segment") {
          this.#queuedChars -= item.sentence.text.length;
          await this.#speak(item.sentence, item.settings);
          continue;
        }
        // A client that reads nothing holds its utterance ends here, within the queue's cap, not in the
        // transport's unbounded send buffer.
        await this.#waitForDrain();
        if (this.#closed) break;
        this.events.utteranceDone(item.utteranceIndex, item.totalSentences);
      }
    } finally {
      this.#working = false;
      if (this.#closing) this.#endNormally();
      else this.activity();
      this.#settleSpoken();
    }
  }

  /** One sentence: its start, its audio as it is made, its end. The service counts how it ended; a stream closed on the way is the client leaving. */
  async #speak(sentence: SpokenSentence, settings: Settings): Promise<void> {
    const signal = this.#abort.signal;
    let sentBytes = 0;
    let place: { release(): void } | undefined;
    try {
      place = this.options.holdPlace?.(signal);
      const speech = await this.options.speak(sentence.text, settings, signal);
      this.events.sentenceStart(sentence, speech);
      for await (const bytes of speech.audio) {
        await this.#waitForDrain();
        if (this.#closed) break;
        this.events.audio(bytes, sentence);
        sentBytes += bytes.byteLength;
      }
      if (this.#closed) return;
      const end = await speech.done;
      this.events.sentenceDone(sentence, { ...end, totalBytes: sentBytes, ignoredFields: speech.prepared.ignoredFields });
    } catch (error) {
      if (this.#closed || signal.aborted) return;
      if (!asApiError(error)) this.options.logger.error("text stream synthesis failed", { error: String(error) });
      const failure = sentenceError(error);
      this.events.sentenceFailed(sentence, failure, sentBytes);
      if (failure.kind === "at_capacity" && this.options.endWhenFull) this.#end({ kind: "at_capacity", retryAfterSeconds: failure.retryAfterSeconds ?? 1 });
    } finally {
      place?.release();
    }
  }

  /** Flow control (async/drain.ts); a client that stopped reading is dropped, which frees its generation state. */
  async #waitForDrain(): Promise<void> {
    const { stallTimeoutMs } = this.options;
    if ((await waitForDrain({ bufferedBytes: () => this.events.bufferedBytes(), closed: () => this.#closed, stallTimeoutMs })) !== "stalled") return;
    this.options.logger.warn("text stream client stopped reading; closing", { stallTimeoutMs });
    this.#end({ kind: "stalled" });
  }

  /**
   * Activity moves the idle deadline without touching the timer, which checks it when it fires: a timer
   * restarted per message would cost a flood of keep-alives a timer each.
   */
  #armIdle(delayMs: number): void {
    const idleTimeoutMs = this.options.idleTimeoutMs!;
    this.#idleTimerArmed = true;
    this.#arm(delayMs, () => {
      this.#idleTimerArmed = false;
      const quietMs = performance.now() - this.#lastActivityMs;
      if (quietMs < idleTimeoutMs) return this.#armIdle(idleTimeoutMs - quietMs);
      // Not idle while audio is still being made or sent for this client.
      if (this.#working) return this.activity();
      this.#end({ kind: "idle", idleSeconds: Math.round(idleTimeoutMs / 1000) });
    });
  }

  #arm(delayMs: number, onTimeout: () => void): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(onTimeout, delayMs);
  }
}

/** A sentence's failure in the stream's terms: a full engine refuses the sentence, not the stream. */
function sentenceError(error: unknown): TextStreamError {
  if (error instanceof EngineFullError) return { kind: "at_capacity", message: error.message, retryAfterSeconds: error.retryAfterSeconds, cause: error };
  const refusal = asApiError(error);
  if (refusal) return { kind: "invalid", message: refusal.message, cause: error };
  return { kind: "failed", message: "speech generation failed", cause: error };
}
