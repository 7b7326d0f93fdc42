/** One pass over a text: ordered rules find semiotic spans; the text between them is kept byte for byte. */
export interface Rule {
  class: string;
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

/** Spans of `text`, earlier rules first; a later rule never takes characters an earlier one took. */
export function tag(text: string, rules: readonly Rule[]): Span[] {
  const taken = new Uint8Array(text.length);
  const spans: Span[] = [];
  for (const rule of rules) {
    const pattern = new RegExp(rule.pattern.source, rule.pattern.flags.includes("g") ? rule.pattern.flags : rule.pattern.flags + "g");
    let match: RegExpExecArray | null;
    while ((match = pattern.exec(text))) {
      const start = match.index;
      const end = start + match[0].length;
      if (end === start) {
        pattern.lastIndex = start + 1;
        continue;
      }
      if (taken.subarray(start, end).some((flag) => flag === 1)) {
        pattern.lastIndex = start + 1;
        continue;
      }
      const spoken = rule.verbalize(match, text);
      if (spoken === null) {
        pattern.lastIndex = start + 1;
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
