/**
 * The one sentence splitter: the WebSocket speech route feeds it text as it arrives (an LLM's output a few
 * characters at a time) and sends each sentence or clause to synthesis as soon as it is known to be complete;
 * the classic model pushes a whole input at once and flushes.
 *
 * A boundary is decided only from text already received, and only once no later text could change the
 * decision (a "." at the end of the buffer may be "3.5"; a "." after a number depends on the next word). So the
 * segments never depend on how the input was cut into pieces, and none is emitted before it is complete.
 */

import type { SPLIT_GRANULARITIES } from "../api/speech.ts";

export type SplitGranularity = (typeof SPLIT_GRANULARITIES)[number];

/**
 * A run-on input is cut at the last whitespace before this many characters (unless the segmenter is given its
 * own cap), so a stream with no boundary can't stall synthesis.
 */
export const MAX_SEGMENT_CHARS = 400;

export interface TextSegmenterOptions {
  /** The longest segment, in UTF-16 code units: a sentence past it is cut. Defaults to MAX_SEGMENT_CHARS. */
  maxSegmentChars?: number;
}

/** A clause with fewer words stays attached to the next one: one- or two-word fragments are synthesized with choppy prosody. */
const MIN_CLAUSE_WORDS = 4;

/** Closing quotes and brackets that belong to the sentence or clause they follow (Latin, guillemet and CJK forms). */
const CLOSERS = `"'”’)\\]»」』）】》〉`;

/**
 * Words that take a "." yet rarely end a sentence, lower-case and without their final ".". Kept short on purpose:
 * a missed split only makes one segment longer, while a wrong split chops a sentence in two.
 */
const ABBREVIATIONS = new Set(["mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "a.m", "p.m"]);

/**
 * Months written short, lower-case and without their ".": followed by a number ("Jan. 5") the "." ends no
 * sentence, so a date reaches text normalization whole. Followed by anything else it may ("I met Jan. He …").
 */
const MONTH_ABBREVIATIONS = new Set(["jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"]);

/** Capital initials: "J" of "J. R. R. Tolkien", "J.R.R" of "J.R.R. Tolkien". */
const INITIALS = /^(?:\p{Lu}\.)*\p{Lu}$/u;
const NUMBER = /^\p{N}+$/u;
/** Opening quotes and brackets in front of a word, ignored when reading the word before a ".". */
const LEADING_OPENERS = /^[\p{Ps}\p{Pi}"']+/u;
const PARAGRAPH_BREAK = /\n[^\S\n]*\n/;
const WORD = /[\p{L}\p{N}]+(?:['’-][\p{L}\p{N}]+)*/gu;
const SPEAKABLE = /[\p{L}\p{N}]/u;
const WHITESPACE = /\s/u;
const LOWER_CASE = /^\p{Ll}/u;
const STARTS_WITH_NUMBER = /^\p{N}/u;

/**
 * Places where a segment may end. `stop`: Latin sentence punctuation (runs such as "?!" or "..."), which needs
 * whitespace after it. `cjkStop`: CJK full stops, which need none. `paragraph`: a blank line (always "\n\n" in the
 * compacted buffer). `pause`: clause punctuation, only in "clause" mode. Each may be followed by closing quotes or brackets.
 */
const SENTENCE_CANDIDATES = `(?<stop>[.!?…]+)[${CLOSERS}]*|(?<cjkStop>[。！？]+)[${CLOSERS}]*|(?<paragraph>\\n\\n)`;
const CLAUSE_CANDIDATES = `${SENTENCE_CANDIDATES}|(?<pause>[,;:—–])[${CLOSERS}]*`;

/** What one candidate means, given the text received so far. */
type Verdict = "ends" | "continues" | "undecided";


export class TextSegmenter {
  /**
   * Received text not yet emitted. It never starts with whitespace, so lengths are measured from the first word,
   * and its whitespace is compacted, so a flood of spaces can neither grow it nor make each push rescan them.
   */
  #buffer = "";
  /**
   * Offset in #buffer before which every candidate has been judged not to end the segment (or no candidate
   * starts): the next search resumes there, so text is searched once however it arrives.
   */
  #judgedUpTo = 0;
  /** Offset in #buffer before which no character is speakable (the first segment is punctuation so far). */
  #unspeakableUpTo = 0;
  /** Words in #buffer before #wordsCountedUpTo, an offset where no word runs across (clause punctuation). */
  #wordsCounted = 0;
  #wordsCountedUpTo = 0;
  /** Null for "none", which never splits. */
  readonly #candidates: RegExp | null;
  readonly #maxSegmentChars: number;

  constructor(granularity: SplitGranularity, options: TextSegmenterOptions = {}) {
    const maxSegmentChars = options.maxSegmentChars ?? MAX_SEGMENT_CHARS;
    // Two code units at least, so a hard cut never has to split a surrogate pair into an empty segment.
    if (!Number.isInteger(maxSegmentChars) || maxSegmentChars < 2) throw new RangeError(`maxSegmentChars must be an integer of at least 2, got ${maxSegmentChars}`);
    this.#maxSegmentChars = maxSegmentChars;
    this.#candidates =
      granularity === "none" ? null : new RegExp(granularity === "clause" ? CLAUSE_CANDIDATES : SENTENCE_CANDIDATES, "gu");
  }

  /**
   * Appends text; returns the segments that are now known to be complete (trimmed, non-empty, in order).
   *
   * Text is taken a cap's worth at a time, so the buffer stays within about two caps however large the push,
   * and every search, cut and slice works on that much: the cost is linear in the text received. Boundaries
   * never depend on how the input was cut, so this gives the segments of one push of the whole.
   */
  push(text: string): string[] {
    // "none" keeps everything for flush and searches nothing: one append.
    if (this.#candidates === null) {
      this.#append(text);
      return [];
    }
    const segments: string[] = [];
    for (let offset = 0; offset < text.length; offset += this.#maxSegmentChars) {
      this.#append(text.slice(offset, offset + this.#maxSegmentChars));
      segments.push(...this.#takeCompleteSegments(false));
    }
    return segments;
  }

  #append(text: string): void {
    // Only the buffer's trailing whitespace run can grow into the new text; everything before it is compacted already.
    let trailingRunStart = this.#buffer.length;
    while (trailingRunStart > 0 && WHITESPACE.test(this.#buffer[trailingRunStart - 1]!)) trailingRunStart--;
    const tail = compactWhitespace(this.#buffer.slice(trailingRunStart) + text);
    this.#buffer = trailingRunStart === 0 ? tail.trimStart() : this.#buffer.slice(0, trailingRunStart) + tail;
    // A trailing "\n" may have become a blank line: the run is searched again.
    this.#judgedUpTo = Math.min(this.#judgedUpTo, trailingRunStart);
  }

  /** Ends the input: returns whatever remains as final segments (trimmed, non-empty). Resets for reuse. */
  flush(): string[] {
    const segments = this.#takeCompleteSegments(true);
    const rest = normalizeWhitespace(this.#buffer);
    if (rest.length > 0) segments.push(rest);
    this.#consume(this.#buffer.length);
    return segments;
  }

  /** Characters buffered and not yet emitted (a whitespace run counts as one, or two for a blank line). */
  get pendingLength(): number {
    return this.#buffer.length;
  }

  /** `atEnd`: no more text will come, so a candidate at the end of the buffer is decided. */
  #takeCompleteSegments(atEnd: boolean): string[] {
    const segments: string[] = [];
    for (let end = this.#nextSegmentEnd(atEnd); end !== undefined; end = this.#nextSegmentEnd(atEnd)) {
      const segment = normalizeWhitespace(this.#buffer.slice(0, end));
      if (segment.length > 0) segments.push(segment);
      this.#consume(end);
    }
    return segments;
  }

  /** Drops the first `end` characters (a segment given out) and what was known about them. */
  #consume(end: number): void {
    this.#buffer = this.#buffer.slice(end).trimStart();
    this.#judgedUpTo = 0;
    this.#unspeakableUpTo = 0;
    this.#wordsCounted = 0;
    this.#wordsCountedUpTo = 0;
  }

  /** Where the first segment in the buffer ends, or undefined while that is not yet known. */
  #nextSegmentEnd(atEnd: boolean): number | undefined {
    const candidates = this.#candidates;
    if (candidates === null) return undefined;
    // The buffer holds at most about two caps (push), so a search that finds nothing within the cap stops soon.
    candidates.lastIndex = this.#judgedUpTo;
    for (let match = candidates.exec(this.#buffer); match !== null; match = candidates.exec(this.#buffer)) {
      const matchEnd = match.index + match[0].length;
      const segmentEnd = match.groups!.paragraph === undefined ? matchEnd : match.index;
      if (segmentEnd > this.#maxSegmentChars) break;
      const verdict = this.#judge(match, atEnd);
      if (verdict === "undecided") return undefined;
      // Punctuation alone ("...", a stray "—") is no sentence to synthesize: it goes along with the next one.
      if (verdict === "ends" && this.#speakableBefore(segmentEnd)) return segmentEnd;
      this.#judgedUpTo = matchEnd;
    }
    if (this.#buffer.length > this.#maxSegmentChars) return this.#runOnCut();
    // Searched to the end and found nothing deciding: later text resumes the search after it.
    this.#judgedUpTo = this.#buffer.length;
    return undefined;
  }

  /** Whether #buffer holds a letter or digit before `end`, each character looked at once per segment. */
  #speakableBefore(end: number): boolean {
    if (end <= this.#unspeakableUpTo) return false;
    if (SPEAKABLE.test(this.#buffer.slice(this.#unspeakableUpTo, end))) return true;
    this.#unspeakableUpTo = end;
    return false;
  }

  #judge(match: RegExpExecArray, atEnd: boolean): Verdict {
    const { stop, cjkStop, pause, paragraph } = match.groups!;
    const matchEnd = match.index + match[0].length;
    if (paragraph !== undefined) return "ends";
    // More punctuation or a closing quote may still follow.
    if (matchEnd === this.#buffer.length) return atEnd ? "ends" : "undecided";
    if (cjkStop !== undefined) return "ends";
    if (!WHITESPACE.test(this.#buffer[matchEnd]!)) return "continues"; // "3.5", "e.g.x", "1,000", "10:30"
    if (pause !== undefined) {
      // "May 5, 2026", "1, 2, 3": a comma between two numbers keeps them in one clause, so a date is normalized whole.
      if (pause === "," && match[0] === "," && STARTS_WITH_NUMBER.test(this.#buffer.slice(match.index - 1, match.index))) {
        const next = this.#nextWordStart(matchEnd, atEnd);
        if (next === undefined) return "undecided";
        if (STARTS_WITH_NUMBER.test(next)) return "continues";
      }
      return this.#wordsBefore(match.index) >= MIN_CLAUSE_WORDS ? "ends" : "continues";
    }
    return stop === "." ? this.#judgeFullStop(match.index, matchEnd, atEnd) : "ends";
  }

  /** Words in #buffer before `pauseIndex`, a clause mark no word runs across: counted on from the last one asked. */
  #wordsBefore(pauseIndex: number): number {
    this.#wordsCounted += countWords(this.#buffer.slice(this.#wordsCountedUpTo, pauseIndex));
    this.#wordsCountedUpTo = pauseIndex;
    return this.#wordsCounted;
  }

  /** A single "." followed by whitespace: a sentence end unless the word before it says otherwise. */
  #judgeFullStop(stopIndex: number, afterStop: number, atEnd: boolean): Verdict {
    let wordStart = stopIndex;
    while (wordStart > 0 && !WHITESPACE.test(this.#buffer[wordStart - 1]!)) wordStart--;
    const word = this.#buffer.slice(wordStart, stopIndex).replace(LEADING_OPENERS, "");
    if (ABBREVIATIONS.has(word.toLowerCase()) || INITIALS.test(word)) return "continues";
    if (MONTH_ABBREVIATIONS.has(word.toLowerCase())) {
      const next = this.#nextWordStart(afterStop, atEnd);
      return next === undefined ? "undecided" : STARTS_WITH_NUMBER.test(next) ? "continues" : "ends";
    }
    if (!NUMBER.test(word)) return "ends";
    // "1. Open the file" at the start of a line is a list marker, not a sentence of its own.
    if (wordStart === 0 || this.#buffer[wordStart - 1] === "\n") return "continues";
    // "version 2. and": a number's "." ends the sentence only if the next word doesn't start lower-case.
    const next = this.#nextWordStart(afterStop, atEnd);
    if (next === undefined) return "undecided";
    return LOWER_CASE.test(next) ? "continues" : "ends";
  }

  /**
   * The first character of the word after the whitespace at `whitespaceStart` (a whole code point), "" when no
   * more text will come, or undefined while it is still unknown: no next word yet, or only the first half of a
   * surrogate pair (𝑥 may be lower-case). The whitespace is compacted to one character, or to "\n\n", whose
   * second "\n" is then the answer.
   */
  #nextWordStart(whitespaceStart: number, atEnd: boolean): string | undefined {
    const nextCharacter = this.#buffer.slice(whitespaceStart + 1, whitespaceStart + 3);
    if (nextCharacter.length === 0 || (nextCharacter.length === 1 && isHighSurrogate(nextCharacter.charCodeAt(0)))) {
      return atEnd ? nextCharacter : undefined;
    }
    return nextCharacter;
  }

  /** The end of a segment that has no boundary within the cap: the last whitespace, or a hard cut in one giant word. */
  #runOnCut(): number {
    const maxChars = this.#maxSegmentChars;
    for (let index = Math.min(maxChars, this.#buffer.length - 1); index > 0; index--) {
      if (WHITESPACE.test(this.#buffer[index]!)) return index;
    }
    // Don't split a surrogate pair (an emoji, a rare CJK character) across two segments.
    return isHighSurrogate(this.#buffer.charCodeAt(maxChars - 1)) ? maxChars - 1 : maxChars;
  }
}

/** Keeps of each whitespace run only what the rules read from it: a blank line, a line break, or a space. */
function compactWhitespace(text: string): string {
  return text.replace(/\s+/gu, (run) => (PARAGRAPH_BREAK.test(run) ? "\n\n" : run.includes("\n") ? "\n" : " "));
}

function isHighSurrogate(codeUnit: number): boolean {
  return codeUnit >= 0xd800 && codeUnit <= 0xdbff;
}

function normalizeWhitespace(text: string): string {
  return text.replace(/\s+/gu, " ").trim();
}

function countWords(text: string): number {
  return text.match(WORD)?.length ?? 0;
}
