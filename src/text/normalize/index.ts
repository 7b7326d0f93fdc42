/**
 * Text normalization: written forms ("$19.99", "03/04/2026", "10:30 pm", "Henry VIII") rewritten as they are said,
 * before the tokenizer sees them. One tagger pass over ordered rules (tagger.ts); the text between spans is kept
 * byte for byte, so text without written forms comes out unchanged.
 */
import { applySpans, tag, type Rule } from "./tagger.ts";
import { dateRules, decadeRule, numericDateRules, quarterRule, timeRules, yearRule } from "./english/datetime.ts";
import { moneyRules } from "./english/money.ts";
import { measureRules } from "./english/measures.ts";
import { electronicRules } from "./english/electronic.ts";
import { telephoneRules } from "./english/telephone.ts";
import { cardinalRules, fractionRules, ordinalRule, percentRule } from "./english/cardinal.ts";
import { romanRules } from "./english/roman.ts";
import { abbreviationRules } from "./english/abbreviations.ts";
import { mathRule, symbolRules } from "./english/symbols.ts";
import { rangeRule } from "./english/ranges.ts";
import { addressRule } from "./english/address.ts";
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
 * - electronic, telephone and numeric dates first: their dots, hyphens and slashes would otherwise be read as
 *   decimals, ranges, minus signs or fractions ("555-123-4567", "03/04/2026", "a.b@c.com");
 * - street addresses, whose house numbers and ZIP codes are read differently from other numbers;
 * - dates with month names, which read their own day spans ("Oct 5-6" → "october fifth to sixth");
 * - an equation before ranges, so "1-2=5" is a subtraction;
 * - ranges next, so "9am-5pm", "$250-$300" and "1960s-80s" read as one range ("to") rather than two pieces and a
 *   dash; decades follow them;
 * - money, measures and times before plain numbers, since each needs the number together with its symbol or unit;
 * - fractions, percentages and ordinals before cardinals, which would otherwise take their digits;
 * - Roman numerals and abbreviations need no digits and only look at their own context;
 * - years and plain cardinals last: they take whatever digits are left.
 */
const ENGLISH_RULES: readonly Rule[] = [
  ...electronicRules,
  ...telephoneRules,
  ...numericDateRules,
  addressRule,
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

export function normalizeText(text: string, options: NormalizeOptions = {}): string {
  const rules = rulesFor(options.language);
  if (rules.length === 0) return text;
  return applySpans(text, tag(text, rules));
}
