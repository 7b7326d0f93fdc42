/**
 * Text normalization: written forms ("$19.99", "03/04/2026", "10:30 pm", "Henry VIII") rewritten as they are said,
 * before the tokenizer sees them. One tagger pass over ordered rules (tagger.ts); the text between spans is kept
 * byte for byte, so text without written forms comes out unchanged.
 */
import { applySpans, tag, type Rule } from "./tagger.ts";
import { contextYearRule, eraYearRule, dateRules, decadeRule, numericDateRules, quarterRule, timeRules, yearRule } from "./english/datetime.ts";
import { moneyRules } from "./english/money.ts";
import { measureRules } from "./english/measures.ts";
import { electronicRules } from "./english/electronic.ts";
import { telephoneRules } from "./english/telephone.ts";
import { cardinalRules, fractionRules, ordinalRule, percentRule } from "./english/cardinal.ts";
import { romanRules } from "./english/roman.ts";
import { abbreviationRules } from "./english/abbreviations.ts";
import { mathRule, powerRule, symbolRules } from "./english/symbols.ts";
import { rangeRule } from "./english/ranges.ts";
import { addressRule, cityStateRule, zipCodeRule } from "./english/address.ts";
import { versionRules } from "./english/versions.ts";
import { converterFor, otherLanguageRules } from "./other-languages.ts";

export interface NormalizeOptions {
  /** The bundle's language (BCP 47, "en" when unknown). */
  language?: string;
}

/** The rules that can read one end of a range, in the order they have in the full list below. */
const RANGE_END_RULES: readonly Rule[] = [...dateRules, decadeRule, ...moneyRules, ...measureRules, ...timeRules, percentRule, ordinalRule, yearRule, ...cardinalRules];

/** An end that still has digits once read ("5x7") is not one these rules understand, so neither is the range. */
function rangeEndWords(written: string): string | null {
  const words = applySpans(written, tag(written, RANGE_END_RULES));
  return /\d/.test(words) ? null : words;
}

/**
 * Earlier rules win a span, so the order is the disambiguation:
 * - electronic, versions ("3.10.12", "v2.3"), telephone and numeric dates first: their dots, hyphens and slashes would otherwise be read as
 *   decimals, ranges, minus signs or fractions ("555-123-4567", "03/04/2026", "a.b@c.com");
 * - street addresses, whose house numbers and ZIP codes are read differently from other numbers, then a state
 *   after a city ("Pittsburgh, PA 15213") and ZIP codes after a state or "ZIP";
 * - dates with month names, which read their own day spans ("Oct 5-6" → "october fifth to sixth");
 * - an equation before ranges, so "1-2=5" is a subtraction;
 * - ranges next, so "9am-5pm", "$250-$300" and "1960s-80s" read as one range ("to") rather than two pieces and a
 *   dash; decades follow them;
 * - money, measures and times before plain numbers, since each needs the number together with its symbol or unit;
 * - fractions, percentages and ordinals before cardinals, which would otherwise take their digits;
 * - Roman numerals and abbreviations need no digits and only look at their own context;
 * - years and plain cardinals last: they take whatever digits are left; a year outside 1100–2099 only after a
 *   word that makes it one ("in 1066", "by 2100").
 */
const ENGLISH_RULES: readonly Rule[] = [
  ...electronicRules,
  ...versionRules,
  powerRule,
  ...telephoneRules,
  ...numericDateRules,
  addressRule,
  cityStateRule,
  zipCodeRule,
  eraYearRule,
  ...dateRules,
  quarterRule,
  mathRule,
  rangeRule(rangeEndWords),
  decadeRule,
  ...moneyRules,
  ...measureRules,
  ...timeRules,
  ...fractionRules,
  percentRule,
  ordinalRule,
  ...romanRules,
  ...abbreviationRules,
  ...symbolRules,
  contextYearRule,
  yearRule,
  ...cardinalRules,
];

/** Rule lists of other languages, built once per language tag. */
const otherLanguageRuleLists = new Map<string, readonly Rule[]>();

function rulesFor(language: string | undefined): readonly Rule[] {
  if (!language || /^en(?:[-_]|$)/i.test(language)) return ENGLISH_RULES;
  let rules = otherLanguageRuleLists.get(language);
  if (!rules) {
    const converter = converterFor(language);
    rules = converter ? otherLanguageRules(converter) : [];
    otherLanguageRuleLists.set(language, rules);
  }
  return rules;
}

/**
 * Longest piece of text one tagger pass sees. A rule whose long candidate turns out not to be its own is tried
 * again one character later, so a pass over a long run of digits and separators ("1/1/1/…") costs more than
 * linear time: ~20 ms at 4,000 characters and seconds at 20,000, against inputs of up to 100,000 characters. No
 * written form is this long, and a sentence rarely is.
 */
export const MAX_PIECE_CHARS = 400;
/** Where a piece may end, best first: after a sentence's end and the whitespace after it, after any whitespace. */
const SENTENCE_END = /[.!?…][)\]"'’”]*\s+/g;
const WHITESPACE = /\s+/g;

/** `text` cut into pieces of at most MAX_PIECE_CHARS that join back to it. */
function pieces(text: string): string[] {
  const cut: string[] = [];
  let start = 0;
  while (text.length - start > MAX_PIECE_CHARS) {
    const window = text.slice(start, start + MAX_PIECE_CHARS);
    const end = lastEnd(window, SENTENCE_END) ?? lastEnd(window, WHITESPACE) ?? MAX_PIECE_CHARS;
    cut.push(text.slice(start, start + end));
    start += end;
  }
  cut.push(text.slice(start));
  return cut;
}

/** The end of the last match of `pattern` in `window` that leaves something before it, or null. */
function lastEnd(window: string, pattern: RegExp): number | null {
  let end: number | null = null;
  pattern.lastIndex = 0;
  for (let match = pattern.exec(window); match; match = pattern.exec(window)) if (match.index > 0) end = match.index + match[0].length;
  return end;
}

export function normalizeText(text: string, options: NormalizeOptions = {}): string {
  const rules = rulesFor(options.language);
  if (rules.length === 0) return text;
  if (text.length <= MAX_PIECE_CHARS) return applySpans(text, tag(text, rules));
  return pieces(text)
    .map((piece) => applySpans(piece, tag(piece, rules)))
    .join("");
}

/**
 * normalizeText for long text without holding the event loop: the same pieces, the same result, with `turn`
 * awaited whenever about `sliceMs` of work has been done since the last one.
 */
export async function normalizeTextInSlices(text: string, options: NormalizeOptions, turn: () => Promise<void>, sliceMs = 8): Promise<string> {
  const rules = rulesFor(options.language);
  if (rules.length === 0 || text.length <= MAX_PIECE_CHARS) return normalizeText(text, options);
  let out = "";
  let sliceStart = performance.now();
  for (const piece of pieces(text)) {
    out += applySpans(piece, tag(piece, rules));
    if (performance.now() - sliceStart >= sliceMs) {
      await turn();
      sliceStart = performance.now();
    }
  }
  return out;
}

