/**
 * Markdown and chat formatting read as a person reads it aloud: headings, list items and table rows become
 * sentences, emphasis and links keep only their words, images their alt text, inline code is read, fenced code
 * blocks are skipped with a short placeholder, and emoji are dropped (or named). Most text that reaches a speech
 * server is an LLM's answer, and LLMs write markdown; its symbols read aloud are noise.
 *
 * Line by line, so it reads a stream as it arrives: the sockets push an LLM's output a few characters at a
 * time, and a `**`, a link or a code fence may be cut anywhere. A line's start is held until its kind (heading,
 * item, quote, table row, fence) is known, a table row until its end, a code block until its closing fence
 * (nothing of it is kept), and the rest of a line is released up to the last space where no inline mark is
 * left open. Inline marks are parsed by marked's inline lexer; marks a cut left unmatched are dropped, never read.
 */
import emojiRegex from "emoji-regex";
import { Lexer, type Token } from "marked";

export interface MarkdownReadingOptions {
  /** Said in place of a fenced code block; "" says nothing. */
  codeBlockPlaceholder: string;
  /** Emoji: dropped, or named with `emojiName` (unnamed ones are dropped). */
  emoji: "drop" | "name";
  emojiName?: (emoji: string) => string | undefined;
}

export const DEFAULT_CODE_BLOCK_PLACEHOLDER = "Code omitted.";
export const DEFAULT_MARKDOWN_READING: MarkdownReadingOptions = { codeBlockPlaceholder: DEFAULT_CODE_BLOCK_PLACEHOLDER, emoji: "drop" };

/** A line held this long without its end is read as it stands, so a stream without newlines cannot grow it. */
const MAX_HELD_LINE_CHARS = 2_000;

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const HEADING = /^ {0,3}#{1,6}(?:[ \t]+|$)/;
const HORIZONTAL_RULE = /^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,}|(?:=[ \t]*){3,})$/;
const BULLET = /^[ \t]*[-*+][ \t]+(?:\[[ xX]\][ \t]+)?/;
/** Up to three digits: "2024. A year" at a line's start is more likely prose than the 2024th item. */
const NUMBERED = /^[ \t]*\d{1,3}[.)][ \t]+/;
const QUOTE = /^ {0,3}>[ \t]?/;
const TABLE_ROW = /^[ \t]*\|/;
const TABLE_DELIMITER = /^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
/** A line start that may still turn into a block mark once more characters arrive. */
const UNDECIDED_START = /^(?:[ \t]*|[ \t]*[-*+_=][ \t*_=-]*|[ \t]*[-*+][ \t]+\[[ xX]?\]?|[ \t]*\d{1,3}[.)]?|[ \t]*`{1,2}|[ \t]*~{1,2}| {0,3}#{1,6}|(?: {0,3}>[ \t]?)+)$/;
const SENTENCE_END = /[.!?…:;][)\]"'’”»]*$/;
/** Emphasis marks a cut left unmatched, against a word; a single "~" is no mark ("~5", "~/notes"). */
const STRAY_MARKS = /(?<![\p{L}\p{N}])(?:[*_]{1,3}|~~)(?=[\p{L}\p{N}])|(?<=[\p{L}\p{N}\p{P}])(?:[*_]{1,3}|~~)(?![\p{L}\p{N}])|`+/gu;
/** SSML elements, kept through markdown for the SSML reading; "sub" too, which HTML shares. */
const SSML_ELEMENT = /^<\/?(?:break|speak|say-as|sub|p|s|prosody|emphasis|phoneme|voice|lang|mark|audio|paragraph|sentence|w)\b/i;
/** HTML tags that end a line or a block: they part the words around them. */
const HTML_BREAKING = /^<(?:br\s*\/?|hr\s*\/?|\/(?:div|summary|details|li|td|th|tr|h[1-6]|blockquote|pre|table|section|article|header|footer))>$/i;
/** A character any mark, entity or emoji needs; text without one is no markdown. */
const MAYBE_MARKDOWN = /[*_`~#>|[\]&=+\-]|^\s*\d{1,3}[.)]\s|\p{Extended_Pictographic}|[\u{1F1E6}-\u{1F1FF}]/mu;
/** Marks meant as text are moved to the private use area while stray marks are removed, then moved back. */
const KEPT_OFFSET = 0xe000;
const KEPT_MARK = /[\u{E02A}\u{E05F}\u{E07E}\u{E060}]/gu;
const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " ", "#39": "'" };
const ENTITY = /&(amp|lt|gt|quot|apos|nbsp|#39);/g;
const EMOJI = emojiRegex();
/** Modifiers and joiners left behind by an emoji cut in two by a stream. */
const EMOJI_LEFTOVERS = /[\u{FE0F}\u{200D}\u{1F3FB}-\u{1F3FF}\u{E0020}-\u{E007F}]/gu;

type LineKind = "paragraph" | "heading" | "item" | "quote" | "table";

export class MarkdownReader {
  /** The current line's text not yet read. */
  #line = "";
  /** What the current line was found to be once its start was decided; undefined while undecided. */
  #kind: LineKind | undefined;
  /** Text of the current line already read and released (its end punctuation depends on it). */
  #releasedOfLine = "";
  #fence: { char: string; length: number } | undefined;
  #inTable = false;

  constructor(private readonly options: MarkdownReadingOptions = DEFAULT_MARKDOWN_READING) {}

  /** Characters held back: the current line's unread part. */
  get pendingLength(): number {
    return this.#line.length;
  }

  /** More text; returns what can be read now. */
  push(text: string): string {
    let out = "";
    let start = 0;
    for (let newline = text.indexOf("\n", start); newline !== -1; newline = text.indexOf("\n", start)) {
      this.#line += text.slice(start, newline);
      out += this.#endLine();
      start = newline + 1;
    }
    this.#line += text.slice(start);
    if (this.#line.length > MAX_HELD_LINE_CHARS && this.#fence === undefined) return out + this.#endLine(false);
    return out + this.#releaseSafePrefix();
  }

  /** The end of the text: whatever is held is read. */
  flush(): string {
    // The text's last line had no line end: none is added.
    const out = this.#line === "" && this.#kind === undefined ? "" : this.#endLine(false);
    this.#fence = undefined;
    this.#inTable = false;
    return out;
  }

  /** The current line is complete (`newline`: it ended with one). */
  #endLine(newline = true): string {
    const line = this.#line;
    this.#line = "";
    const kind = this.#kind;
    this.#kind = undefined;
    const released = this.#releasedOfLine;
    this.#releasedOfLine = "";
    const ending = newline ? "\n" : "";
    if (kind !== undefined) return this.#finishBlock(kind, released, this.#readInline(kind === "heading" ? line.replace(/(?:^|[ \t]+)#+[ \t]*$/, "") : line)) + ending;

    if (this.#fence) {
      const close = FENCE.exec(line);
      if (close && close[1]![0] === this.#fence.char && close[1]!.length >= this.#fence.length && line.slice(close[0].length).trim() === "") this.#fence = undefined;
      return "";
    }
    const open = FENCE.exec(line);
    if (open) {
      this.#fence = { char: open[1]![0]!, length: open[1]!.length };
      this.#inTable = false;
      return this.options.codeBlockPlaceholder ? `\n${this.options.codeBlockPlaceholder}\n` : "\n";
    }
    if (line.trim() === "") {
      this.#inTable = false;
      return ending;
    }
    if (HORIZONTAL_RULE.test(line)) return ending;
    if (TABLE_ROW.test(line) || (this.#inTable && line.includes("|"))) return this.#readTableRow(line) + ending;
    this.#inTable = false;
    const { kind: lineKind, content } = this.#blockOf(line);
    return this.#finishBlock(lineKind, "", this.#readInline(content)) + ending;
  }

  /** The line's kind and its text without the block marks. */
  #blockOf(line: string): { kind: LineKind; content: string } {
    let content = line;
    let quoted = false;
    for (let quote = QUOTE.exec(content); quote; quote = QUOTE.exec(content)) {
      quoted = true;
      content = content.slice(quote[0].length);
    }
    const heading = HEADING.exec(content);
    if (heading) return { kind: "heading", content: content.slice(heading[0].length).replace(/[ \t]+#+[ \t]*$/, "") };
    const item = BULLET.exec(content) ?? NUMBERED.exec(content);
    if (item) return { kind: "item", content: content.slice(item[0].length) };
    return { kind: quoted ? "quote" : "paragraph", content };
  }

  /** Headings and list items are sentences of their own: they end with a full stop unless punctuated. */
  #finishBlock(kind: LineKind, released: string, rest: string): string {
    if (kind !== "heading" && kind !== "item") return rest;
    const whole = (released + rest).trimEnd();
    if (whole === "" || SENTENCE_END.test(whole)) return rest;
    return `${rest.trimEnd()}.`;
  }

  #readTableRow(line: string): string {
    if (TABLE_DELIMITER.test(line)) {
      this.#inTable = true;
      return "";
    }
    this.#inTable = true;
    const cells = line
      .trim()
      .replace(/^\|/, "")
      .replace(/(?<!\\)\|$/, "")
      .split(/(?<!\\)\|/)
      .map((cell) => this.#readInline(cell.replace(/\\\|/g, "|")).trim())
      .filter((cell) => cell !== "");
    if (cells.length === 0) return "";
    const row = cells.join(", ");
    return SENTENCE_END.test(row) ? row : `${row}.`;
  }

  /** Releases the current line's text up to its last space where no inline mark is open. */
  #releaseSafePrefix(): string {
    if (this.#fence) {
      // Only a closing fence matters in a code block: keep just enough of the line to recognise one.
      if (this.#line.length > 64 && !FENCE.test(this.#line)) this.#line = this.#line.slice(0, 64);
      return "";
    }
    if (this.#kind === undefined) {
      if (UNDECIDED_START.test(this.#line) || TABLE_ROW.test(this.#line) || this.#inTable) return "";
      if (FENCE.test(this.#line)) return "";
      const { kind, content } = this.#blockOf(this.#line);
      this.#kind = kind;
      this.#line = content;
    }
    const cut = safeCut(this.#line);
    if (cut <= 0) return "";
    const released = this.#readInline(this.#line.slice(0, cut));
    this.#line = this.#line.slice(cut);
    this.#releasedOfLine += released;
    return released;
  }

  /** Inline marks removed, their words kept. */
  #readInline(text: string): string {
    if (text === "") return "";
    const read = readTokens(Lexer.lexInline(text))
      .replace(ENTITY, (_, name: string) => ENTITIES[name] ?? "")
      .replace(STRAY_MARKS, "")
      .replace(KEPT_MARK, (mark) => String.fromCharCode(mark.charCodeAt(0) - KEPT_OFFSET));
    return this.#readEmoji(read);
  }

  #readEmoji(text: string): string {
    const named = text.replace(EMOJI, (emoji) => {
      const name = this.options.emoji === "name" ? this.options.emojiName?.(emoji) : undefined;
      return name ? ` ${name} ` : "";
    });
    return named.replace(EMOJI_LEFTOVERS, "");
  }
}

function readTokens(tokens: readonly Token[]): string {
  let out = "";
  for (const token of tokens) {
    switch (token.type) {
      case "strong":
      case "em":
      case "del":
      case "link":
        out += token.tokens ? readTokens(token.tokens) : token.text;
        break;
      case "image":
        out += token.text;
        break;
      case "codespan":
      case "escape":
        // Written on purpose (escaped, or code): kept through the removal of marks a cut left unmatched.
        out += token.text.replace(/[*_~`]/g, (mark: string) => String.fromCharCode(mark.charCodeAt(0) + KEPT_OFFSET));
        break;
      case "br":
        out += " ";
        break;
      case "html":
        // SSML stays for the reading after this one; an HTML tag (<br>, <kbd>, <details>) goes, its text stays.
        out += SSML_ELEMENT.test(token.raw) ? token.raw : HTML_BREAKING.test(token.raw) ? " " : "";
        break;
      case "text":
        out += "tokens" in token && token.tokens ? readTokens(token.tokens) : token.text;
        break;
      default:
        out += token.raw;
    }
  }
  return out;
}

/**
 * How much of a line's unread text may be read now: up to just after its last whitespace with no inline mark
 * open before it (a backtick, a bracket, a run of `*`, `_` or `~`); 0 when there is none.
 */
function safeCut(text: string): number {
  let best = 0;
  let backticks = 0;
  let brackets = 0;
  let parens = 0;
  let stars = 0;
  let underscores = 0;
  let tildes = 0;
  for (let index = 0; index < text.length; index++) {
    const char = text[index]!;
    if (char === "\\") {
      index++;
      continue;
    }
    if (char === "`") backticks++;
    else if (backticks % 2 === 1) continue;
    else if (char === "[") brackets++;
    else if (char === "]") brackets = Math.max(0, brackets - 1);
    else if (char === "(" && text[index - 1] === "]") parens++;
    else if (char === ")" && parens > 0) parens--;
    else if (char === "*" || char === "~" || char === "_") {
      // A run of marks opens or closes one emphasis, whatever its length ("**" is one mark).
      let end = index;
      while (text[end + 1] === char) end++;
      const inWord = /[\p{L}\p{N}]/u.test(text[index - 1] ?? "") && /[\p{L}\p{N}]/u.test(text[end + 1] ?? "");
      // snake_case: an underscore inside a word is no mark.
      if (!(char === "_" && inWord)) {
        if (char === "*") stars++;
        else if (char === "~") tildes++;
        else underscores++;
      }
      index = end;
    }
    else if (/\s/.test(char) && backticks % 2 === 0 && brackets === 0 && parens === 0 && stars % 2 === 0 && underscores % 2 === 0 && tildes % 2 === 0) best = index + 1;
  }
  // The last word may still grow, and a mark may follow it: it stays.
  return best;
}

/** `text` read as a whole: what a reader makes of it after the last piece. */
export function readMarkdown(text: string, options: MarkdownReadingOptions = DEFAULT_MARKDOWN_READING): string {
  // Most text has no mark at all: it is read as it is, byte for byte.
  if (!mayBeMarkdown(text)) return text;
  const reader = new MarkdownReader(options);
  return reader.push(text) + reader.flush();
}

/** Whether `text` has any character a mark, an entity or an emoji needs; without one it is read as it is. */
export function mayBeMarkdown(text: string): boolean {
  return MAYBE_MARKDOWN.test(text);
}

