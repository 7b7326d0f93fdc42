/**
 * Speech with character timings (ElevenLabs' /with-timestamps routes). The text is cut into sentences by the
 * segmenter the WebSocket route uses, and each sentence is one request of the speech service, as a WebSocket
 * sentence is: admission, backpressure and cancellation are the service's. A sentence's audio is measured as it
 * is made, so where each sentence starts and ends in the audio is exact. Within a sentence no model here says
 * when each character is spoken, so the sentence's time is spread over its characters in proportion (each
 * character an equal share); whitespace between sentences takes no time, at the boundary.
 *
 * The joined audio is one stream in the requested format (one encoder across the sentences), so a player
 * hears no seam between them.
 */
import { concatBytes, concatFloat32 } from "../lib/concat.ts";
import type { EncodingOptions, ResponseFormat } from "../audio/encoders.ts";
import { createStreamEncoder } from "../audio/stream-encoder.ts";
import { TextSegmenter } from "../text/segmenter.ts";
import { badRequest } from "../api/errors.ts";
import type { SamplesDelivery, SpeechService, SpeechSpec, StartedSpeech } from "../speech/service.ts";

/** ElevenLabs' alignment: one entry per character of the text (a code point), in order, times in seconds. */
export interface CharacterAlignment {
  characters: string[];
  character_start_times_seconds: number[];
  character_end_times_seconds: number[];
}

/** A piece of the utterance: audio, and the alignment of the characters whose sentence ends in it. */
export interface TimedPiece<Audio> {
  audio: Audio;
  alignment: CharacterAlignment | null;
  /** The same over the text as the model read it (markdown read, normalized): ElevenLabs' normalized_alignment. */
  normalizedAlignment: CharacterAlignment | null;
  /** The utterance's last piece. */
  last: boolean;
}

/** The audio the caller wants, which the spec's output names; each sentence comes as samples at its rate. */
interface TimedOutput {
  responseFormat: ResponseFormat;
  sampleRateHz: number;
  encoding: EncodingOptions;
}

/** Where a sentence lies in the text, in code points: [start, end). */
interface SentenceSpan {
  text: string;
  start: number;
  end: number;
}

export class TimedSpeech {
  readonly #characters: string[];
  #elapsedSamples = 0;
  /** Characters already given a time. */
  #alignedUpTo = 0;

  private constructor(
    private readonly service: SpeechService,
    private readonly spec: SpeechSpec,
    private readonly options: TimedOutput,
    private readonly signal: AbortSignal,
    private readonly onAudio: ((seconds: number) => void) | undefined,
    private readonly spans: SentenceSpan[],
    private readonly first: StartedSpeech<Float32Array>,
  ) {
    this.#characters = Array.from(spec.text);
  }

  /**
   * Checks the request and starts its first sentence, so that a refusal (a bad field, an unknown voice, a
   * full engine) is a status line, not a broken stream. The rest start as the audio is read.
   */
  static async start(service: SpeechService, spec: SpeechSpec, signal: AbortSignal, onAudio?: (seconds: number) => void): Promise<TimedSpeech> {
    if (spec.text.length > service.maxInputChars) throw badRequest(`text must be at most ${service.maxInputChars} characters (got ${spec.text.length})`, "text");
    const spans = sentenceSpans(spec.text);
    const first = await startSentence(service, spec, spans[0]!.text, signal, onAudio);
    const { format, bitrateKbps } = spec.output;
    const output = { responseFormat: format, sampleRateHz: first.prepared.outputSampleRateHz, encoding: bitrateKbps === undefined ? {} : { bitrateKbps } };
    return new TimedSpeech(service, spec, output, signal, onAudio, spans, first);
  }

  /** The request's fields the served model ignored, as the service names them. */
  get ignoredFields(): readonly string[] {
    return this.first.prepared.ignoredFields;
  }

  /**
   * Mono samples at the requested rate as they are made; each sentence's last piece carries the alignment of
   * its characters (with the whitespace before it, and, for the last, after it).
   */
  async *pcm(): AsyncGenerator<TimedPiece<Float32Array>, void, undefined> {
    for (let index = 0; index < this.spans.length; index++) {
      const span = this.spans[index]!;
      const speech = index === 0 ? this.first : await startSentence(this.service, this.spec, span.text, this.signal, this.onAudio);
      const startSeconds = this.#elapsedSamples / this.options.sampleRateHz;
      let held: Float32Array | undefined;
      for await (const samples of speech.audio) {
        if (held) yield { audio: held, alignment: null, normalizedAlignment: null, last: false };
        held = samples;
        this.#elapsedSamples += held.length;
      }
      if (this.signal.aborted) return;
      const endSeconds = this.#elapsedSamples / this.options.sampleRateHz;
      const last = index === this.spans.length - 1;
      yield { audio: held ?? new Float32Array(0), alignment: this.#align(span, startSeconds, endSeconds, last), normalizedAlignment: spokenAlignment(speech.prepared.job.text, index > 0, startSeconds, endSeconds), last };
    }
  }

  /** The audio in the requested format as it is made, the joined pieces one file. */
  async *encoded(): AsyncGenerator<TimedPiece<Uint8Array>, void, undefined> {
    const encoder = await createStreamEncoder(this.options.responseFormat, this.options.sampleRateHz, this.options.encoding);
    let ended = false;
    try {
      for await (const piece of this.pcm()) {
        let audio = await encoder.push(piece.audio);
        if (piece.last) {
          ended = true;
          audio = concatBytes([audio, await encoder.end()]);
        }
        if (audio.byteLength > 0 || piece.alignment) yield { audio, alignment: piece.alignment, normalizedAlignment: piece.normalizedAlignment, last: piece.last };
      }
    } finally {
      if (!ended) encoder.close();
    }
  }

  /** The whole utterance as one file, and the alignment of all of its text. */
  async file(): Promise<{ audio: Uint8Array; alignment: CharacterAlignment; normalizedAlignment: CharacterAlignment }> {
    const samples: Float32Array[] = [];
    const alignments: CharacterAlignment[] = [];
    const normalized: CharacterAlignment[] = [];
    for await (const piece of this.pcm()) {
      samples.push(piece.audio);
      if (piece.alignment) alignments.push(piece.alignment);
      if (piece.normalizedAlignment) normalized.push(piece.normalizedAlignment);
    }
    const { bytes: audio } = await this.service.renderFile(concatFloat32(samples), this.options.sampleRateHz, this.options.responseFormat, this.options.encoding);
    return { audio, alignment: joinAlignments(alignments), normalizedAlignment: joinAlignments(normalized) };
  }

  /**
   * The characters from the end of the previous sentence to the end of this one (to the end of the text for
   * the last): those before the sentence (whitespace) at its start, taking no time, then the sentence's own,
   * each an equal share of its audio.
   */
  #align(span: SentenceSpan, startSeconds: number, endSeconds: number, last: boolean): CharacterAlignment {
    const alignment: CharacterAlignment = { characters: [], character_start_times_seconds: [], character_end_times_seconds: [] };
    const add = (character: string, start: number, end: number) => {
      alignment.characters.push(character);
      alignment.character_start_times_seconds.push(roundSeconds(start));
      alignment.character_end_times_seconds.push(roundSeconds(end));
    };
    for (let at = this.#alignedUpTo; at < span.start; at++) add(this.#characters[at]!, startSeconds, startSeconds);
    const times = evenCharacterTimes(span.end - span.start, startSeconds, endSeconds);
    for (let at = span.start; at < span.end; at++) add(this.#characters[at]!, times[at - span.start]!, times[at - span.start + 1]!);
    const through = last ? this.#characters.length : span.end;
    for (let at = span.end; at < through; at++) add(this.#characters[at]!, endSeconds, endSeconds);
    this.#alignedUpTo = through;
    return alignment;
  }
}

/**
 * The sentence as the model read it, each character an equal share of its audio; a sentence after the first
 * opens with the space that joins it to the one before, taking no time.
 */
function spokenAlignment(spoken: string, joined: boolean, startSeconds: number, endSeconds: number): CharacterAlignment {
  const characters = Array.from(spoken.replace(/\s+/g, " ").trim());
  const times = evenCharacterTimes(characters.length, startSeconds, endSeconds);
  const alignment: CharacterAlignment = {
    characters: joined ? [" ", ...characters] : characters,
    character_start_times_seconds: [...(joined ? [roundSeconds(startSeconds)] : []), ...characters.map((_, index) => roundSeconds(times[index]!))],
    character_end_times_seconds: [...(joined ? [roundSeconds(startSeconds)] : []), ...characters.map((_, index) => roundSeconds(times[index + 1]!))],
  };
  return alignment;
}

/**
 * Where `count` characters spoken one after another begin, in equal shares of [start, end] (in whatever unit
 * those are): count + 1 times, the last one the end of the last character. Both of ElevenLabs' alignments use
 * it, the routes' in seconds and the sockets' in milliseconds.
 */
export function evenCharacterTimes(count: number, start: number, end: number): number[] {
  return Array.from({ length: count + 1 }, (_, index) => start + (index * (end - start)) / Math.max(1, count));
}

/**
 * The sentence as a request of its own, as samples at the output rate (the route encodes the joined audio),
 * streamed as they are made; with a speed, whole: a time-stretch needs the whole sentence.
 */
function startSentence(service: SpeechService, spec: SpeechSpec, sentence: string, signal: AbortSignal, onAudio: ((seconds: number) => void) | undefined): Promise<StartedSpeech<Float32Array>> {
  const streamed = spec.speed === undefined || spec.speed === 1;
  const delivery: SamplesDelivery = { mode: streamed ? "audio_stream" : "file", streamed, admit: "now", whenFull: "reject", audio: "samples" };
  return service.start({ ...spec, text: sentence }, delivery, signal, onAudio);
}

/**
 * The text's sentences as the segmenter cuts them, each with where it lies in the text. The segmenter trims
 * and compacts whitespace and changes nothing else, so a sentence is found by walking its other characters.
 */
export function sentenceSpans(text: string): SentenceSpan[] {
  const segmenter = new TextSegmenter("sentence");
  const sentences = [...segmenter.push(text), ...segmenter.flush()];
  const characters = Array.from(text);
  const isSpace = (character: string) => /\s/u.test(character);
  const spans: SentenceSpan[] = [];
  let cursor = 0;
  for (const sentence of sentences) {
    let start = -1;
    for (const character of sentence) {
      if (isSpace(character)) continue;
      while (cursor < characters.length && characters[cursor] !== character) cursor++;
      if (start < 0) start = cursor;
      cursor++;
    }
    spans.push({ text: sentence, start: Math.max(0, start), end: Math.min(cursor, characters.length) });
  }
  // Text that is all whitespace or punctuation still gets one request, so the service judges it as it would.
  return spans.length > 0 ? spans : [{ text, start: 0, end: characters.length }];
}

function joinAlignments(alignments: readonly CharacterAlignment[]): CharacterAlignment {
  return {
    characters: alignments.flatMap((alignment) => alignment.characters),
    character_start_times_seconds: alignments.flatMap((alignment) => alignment.character_start_times_seconds),
    character_end_times_seconds: alignments.flatMap((alignment) => alignment.character_end_times_seconds),
  };
}

/** Times to the microsecond: finer is noise, and JSON stays short. */
function roundSeconds(seconds: number): number {
  return Math.round(seconds * 1e6) / 1e6;
}
