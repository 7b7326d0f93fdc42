/**
 * Upstream's text preparation and long-text chunking (pocket_tts/models/tts_model.py `prepare_text_prompt` and
 * `split_into_best_sentences`; docs/pocket-tts.md §1.13), reproduced exactly so that chunk boundaries, and
 * therefore the audio, match the reference.
 *
 * Upstream is Python. Its string predicates are mirrored with equivalents that agree with Python on every
 * code point of their shared Unicode version (checked exhaustively against CPython 3.11, Unicode 14):
 * - `str.isspace` is PYTHON_WHITESPACE. It differs from JS `trim()`, which keeps U+001C–U+001F and U+0085 but
 *   strips U+FEFF.
 * - `isupper` is \p{Uppercase}, `isalnum` is [\p{L}\p{N}] and `upper` is `toUpperCase()` (full case mapping:
 *   "ß" → "SS").
 * - `text[0]` and `text[-1]` are whole code points, not UTF-16 units.
 */
import type { SentencePieceTokenizer } from "../../text/sentencepiece.ts";

/** The model-config flags that change text preparation (§0 "Model versions you will meet", §1.13). */
export interface TextPromptOptions {
  /** v1 / `english_2026-01` only: prefix short prompts with 8 spaces, because the model does badly on very few tokens. */
  padWithSpacesForShortInputs: boolean;
  /** German and French 24-layer configs: `;` becomes `,`. */
  removeSemicolons: boolean;
}

export interface PreparedTextPrompt {
  text: string;
  /**
   * 3 for prompts of at most 4 words, else 1. Generation runs `guess + 2` frames after EOS unless the config
   * sets `model_recommended_frames_after_eos` (§1.12).
   */
  framesAfterEosGuess: number;
}

/** `MAX_TOKEN_PER_CHUNK` in upstream default_parameters.py (§1.12). */
const MAX_TOKENS_PER_CHUNK = 50;
const SHORT_PROMPT_MAX_WORDS = 4;
const FRAMES_AFTER_EOS_GUESS_SHORT = 3;
const FRAMES_AFTER_EOS_GUESS_LONG = 1;
const SHORT_INPUT_PADDING = " ".repeat(8);
/** Padding applies below this many words, counted after the final period is added. */
const PADDING_WORD_LIMIT = 5;
/**
 * Upstream takes the boundary tokens from encoding these strings and dropping the first piece (the dummy-prefix
 * "▁"). The tokenizer chooses the split, so "..." is one boundary token, not three.
 */
const SENTENCE_END_MARKS = ".!...?";
const CLAUSE_END_MARKS = ",;:";

/** Code points for which CPython's `str.isspace()` is true: category Zs, or bidirectional class WS, B or S. */
const PYTHON_WHITESPACE: ReadonlySet<number> = new Set([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
  0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
]);
const UPPERCASE_CHARACTER = /^\p{Uppercase}$/u;
const LETTER_OR_NUMBER = /^[\p{L}\p{N}]$/u;

export class EmptyTextPromptError extends Error {
  constructor() {
    super("Text prompt cannot be empty");
    this.name = "EmptyTextPromptError";
  }
}

/** Upstream `prepare_text_prompt` (§1.13 steps 1–7). */
export function prepareTextPrompt(text: string, options: TextPromptOptions): PreparedTextPrompt {
  let prepared = pythonStrip(text);
  if (prepared === "") throw new EmptyTextPromptError();
  // One pass of "  " → " ", as upstream does: three spaces become two.
  prepared = prepared.replaceAll("\n", " ").replaceAll("\r", " ").replaceAll("  ", " ");
  if (options.removeSemicolons) prepared = prepared.replaceAll(";", ",");
  const framesAfterEosGuess = framesAfterEosGuessFor(prepared);

  const firstChar = String.fromCodePoint(prepared.codePointAt(0)!);
  if (!UPPERCASE_CHARACTER.test(firstChar)) prepared = firstChar.toUpperCase() + prepared.slice(firstChar.length);
  if (LETTER_OR_NUMBER.test(lastCharOf(prepared))) prepared += ".";

  if (options.padWithSpacesForShortInputs && pythonWordCount(prepared) < PADDING_WORD_LIMIT) prepared = SHORT_INPUT_PADDING + prepared;
  return { text: prepared, framesAfterEosGuess };
}

/**
 * prepare_text_prompt's frames-after-EOS guess (§1.13 step 4) for text already prepared, which may be blank:
 * a piece cut from inside a chunk can be a lone "▁".
 */
export function framesAfterEosGuessFor(text: string): number {
  return pythonWordCount(text) <= SHORT_PROMPT_MAX_WORDS ? FRAMES_AFTER_EOS_GUESS_SHORT : FRAMES_AFTER_EOS_GUESS_LONG;
}

/**
 * Upstream `split_into_best_sentences`: the prepared text cut into chunks of at most `maxTokensPerChunk`
 * tokens, generated one by one (§1.13, §2.2).
 *
 * 1. Segments end after a run of sentence-end tokens. Each segment is decoded back to text.
 * 2. A segment over the limit is re-encoded and cut after runs of clause-end tokens, if that yields more than
 *    one piece.
 * 3. Segments are packed greedily, joined by " ", by their token counts.
 *
 * A single segment can still exceed the limit, as upstream allows (it only logs a warning); kept here so the
 * chunks match upstream's, and cut further by `splitTokensWithinBudget`.
 */
export function splitIntoBestSentences(text: string, tokenizer: SentencePieceTokenizer, options: TextPromptOptions, maxTokensPerChunk = MAX_TOKENS_PER_CHUNK): string[] {
  // The strip drops the short-input padding again: chunking ignores it, as upstream does.
  const prepared = pythonStrip(prepareTextPrompt(text, options).text);
  const sentenceEndIds = new Set(tokenizer.encode(SENTENCE_END_MARKS).slice(1));
  const clauseEndIds = new Set(tokenizer.encode(CLAUSE_END_MARKS).slice(1));

  const segments: TextSegment[] = [];
  for (const sentence of segmentAfterBoundaries(tokenizer.encode(prepared), sentenceEndIds, tokenizer)) {
    if (sentence.tokenCount <= maxTokensPerChunk) {
      segments.push(sentence);
      continue;
    }
    const clauses = segmentAfterBoundaries(tokenizer.encode(pythonStrip(sentence.text)), clauseEndIds, tokenizer);
    if (clauses.length > 1) segments.push(...clauses);
    else segments.push(sentence);
  }

  const chunks: string[] = [];
  let chunkText = "";
  let chunkTokenCount = 0;
  for (const segment of segments) {
    if (chunkText === "") {
      chunkText = segment.text;
      chunkTokenCount = segment.tokenCount;
    } else if (chunkTokenCount + segment.tokenCount > maxTokensPerChunk) {
      chunks.push(pythonStrip(chunkText));
      chunkText = segment.text;
      chunkTokenCount = segment.tokenCount;
    } else {
      chunkText += " " + segment.text;
      chunkTokenCount += segment.tokenCount;
    }
  }
  if (chunkText !== "") chunks.push(pythonStrip(chunkText));
  return chunks;
}

/**
 * Cuts token ids into consecutive pieces of at most `maxTokens`, for a chunk upstream's splitter leaves too
 * long (a sentence with no , ; or :, or one endless word such as "9999…"): every piece must fit the FlowLM
 * cache beside the voice and its generated frames. The pieces concatenate to exactly `tokenIds`.
 *
 * Each cut goes where a word starts ("▁" piece); inside a word with no such place in reach, between two
 * characters, so a byte-fallback character such as an emoji stays whole; only a run of continuation bytes
 * longer than the limit is cut anywhere. Among the allowed places the one nearest an even share of what is
 * left wins, so the pieces come out about equal instead of full ones and a stub.
 */
export function splitTokensWithinBudget(tokenIds: readonly number[], maxTokens: number, tokenizer: SentencePieceTokenizer): number[][] {
  if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new RangeError(`a chunk must allow at least one token, got ${maxTokens}`);
  const pieces: number[][] = [];
  let start = 0;
  while (tokenIds.length - start > maxTokens) {
    const remaining = tokenIds.length - start;
    const evenCut = start + Math.ceil(remaining / Math.ceil(remaining / maxTokens));
    const cut = nearestCut(start, evenCut, start + maxTokens, [(index) => tokenizer.startsWord(tokenIds[index]!), (index) => !tokenizer.continuesCharacter(tokenIds[index]!)]) ?? evenCut;
    pieces.push(tokenIds.slice(start, cut));
    start = cut;
  }
  pieces.push(tokenIds.slice(start));
  return pieces;
}

/**
 * The cut (index of the first token of the next piece) in (start, last] nearest `target`, the later one on
 * a tie, that the first rule allows; failing that, the next rule.
 */
function nearestCut(start: number, target: number, last: number, rules: readonly ((index: number) => boolean)[]): number | undefined {
  for (const allowed of rules) {
    let best: number | undefined;
    for (let index = start + 1; index <= last; index++) {
      if (allowed(index) && (best === undefined || Math.abs(index - target) <= Math.abs(best - target))) best = index;
    }
    if (best !== undefined) return best;
  }
  return undefined;
}

interface TextSegment {
  tokenCount: number;
  text: string;
}

/**
 * Upstream `_find_boundary_indices` + `_segments_from_boundaries`: a segment ends where a non-boundary token
 * follows one or more boundary tokens.
 */
function segmentAfterBoundaries(tokenIds: readonly number[], boundaryIds: ReadonlySet<number>, tokenizer: SentencePieceTokenizer): TextSegment[] {
  const starts = [0];
  let previousWasBoundary = false;
  tokenIds.forEach((id, index) => {
    if (boundaryIds.has(id)) {
      previousWasBoundary = true;
    } else {
      if (previousWasBoundary) starts.push(index);
      previousWasBoundary = false;
    }
  });
  starts.push(tokenIds.length);
  const segments: TextSegment[] = [];
  for (let index = 0; index + 1 < starts.length; index++) {
    const ids = tokenIds.slice(starts[index], starts[index + 1]);
    segments.push({ tokenCount: ids.length, text: tokenizer.decode(ids) });
  }
  return segments;
}

/** Python's `text[-1]`: the last code point, with both halves of a trailing surrogate pair. */
function lastCharOf(text: string): string {
  const pairStart = text.length >= 2 ? text.codePointAt(text.length - 2)! : 0;
  return String.fromCodePoint(pairStart > 0xffff ? pairStart : text.codePointAt(text.length - 1)!);
}

/** Python `str.strip()` with no argument. */
function pythonStrip(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && PYTHON_WHITESPACE.has(text.charCodeAt(start))) start++;
  while (end > start && PYTHON_WHITESPACE.has(text.charCodeAt(end - 1))) end--;
  return text.slice(start, end);
}

/** `len(text.split())`: runs of Python whitespace separate words. */
function pythonWordCount(text: string): number {
  let words = 0;
  let inWord = false;
  for (let index = 0; index < text.length; index++) {
    const isSpace = PYTHON_WHITESPACE.has(text.charCodeAt(index));
    if (!isSpace && !inWord) words++;
    inWord = !isSpace;
  }
  return words;
}
