/**
 * Text normalization: written forms ("$19.99", "03/04/2026", "10:30 pm") rewritten as they are said, before
 * the tokenizer sees them. One tagger pass over ordered rules (tagger.ts); the text between spans is kept byte
 * for byte, so text without written forms comes out unchanged.
 */
import { applySpans, tag, type Rule } from "./tagger.ts";
import { dateRules, timeRules, yearRule } from "./english/datetime.ts";
import { moneyRules } from "./english/money.ts";

export interface NormalizeOptions {
  /** The bundle's language (BCP 47, "en" when unknown). */
  language?: string;
}

/** Earlier rules win a span: dates and times before money, years last. */
const ENGLISH_RULES: readonly Rule[] = [...dateRules, ...timeRules, ...moneyRules, yearRule];

export function normalizeText(text: string, options: NormalizeOptions = {}): string {
  void options.language;
  return applySpans(text, tag(text, ENGLISH_RULES));
}
