/** One pass over a text: ordered rules find semiotic spans; the text between them is kept byte for byte. */
export interface Rule {
  class: string;
  /** Global or not, it is scanned as global; the rule's own object is never advanced. */
  pattern: RegExp;
  /** The spoken form of a match, or null to let later rules try. */
  verbalize(match: RegExpExecArray, text: string): string | null;
}

export interface Span {
  start: number;
  end: number;
  class: string;
  written: string;
  spoken: string;
}

/** Each rule's pattern as a private global copy, so scanning never moves the lastIndex of a shared RegExp. */
const scanners = new WeakMap<Rule, RegExp>();

function scannerOf(rule: Rule): RegExp {
  let scanner = scanners.get(rule);
  if (!scanner) {
    const { source, flags } = rule.pattern;
    scanner = new RegExp(source, flags.includes("g") ? flags : `${flags}g`);
    scanners.set(rule, scanner);
  }
  scanner.lastIndex = 0;
  return scanner;
}

/** Spans of `text`, earlier rules first; a later rule never takes characters an earlier one took. */
export function tag(text: string, rules: readonly Rule[]): Span[] {
  const taken = new Uint8Array(text.length);
  const spans: Span[] = [];
  for (const rule of rules) {
    const scanner = scannerOf(rule);
    let match: RegExpExecArray | null;
    while ((match = scanner.exec(text))) {
      const start = match.index;
      const end = start + match[0].length;
      const spoken = end > start && taken.subarray(start, end).every((flag) => flag === 0) ? rule.verbalize(match, text) : null;
      if (spoken === null) {
        scanner.lastIndex = start + 1;
        continue;
      }
      taken.fill(1, start, end);
      spans.push({ start, end, class: rule.class, written: match[0], spoken });
    }
  }
  return spans.sort((a, b) => a.start - b.start);
}

const WORD_CHAR = /[\p{L}\p{N}]/u;

/** The text with each span replaced by its spoken form, spaced off from letters or digits it touches. */
export function applySpans(text: string, spans: readonly Span[]): string {
  let out = "";
  let cursor = 0;
  for (const span of spans) {
    out += text.slice(cursor, span.start);
    const before = out.slice(-1);
    const after = text.charAt(span.end);
    let spoken = span.spoken;
    if (spoken && before && WORD_CHAR.test(before) && WORD_CHAR.test(spoken.charAt(0))) spoken = ` ${spoken}`;
    if (spoken && after && WORD_CHAR.test(after) && WORD_CHAR.test(spoken.slice(-1))) spoken = `${spoken} `;
    out += spoken;
    cursor = span.end;
  }
  return out + text.slice(cursor);
}
