/** Ranges: "2–5", "9am-5pm", "1990-1995", "$250-$300", "2-5lb", "1960s-80s", each end read by the other rules. */
import type { Rule } from "../tagger.ts";

/** One end of a range: a number with an optional currency before and an optional unit, am/pm or "s" after. */
const END = String.raw`(?:[$£€¥₹]\s?)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:[.:]\d+)?(?:\s?[AaPp]\.?[Mm]\.?(?![\p{L}])|'?s|%|\s?°[CF]?|\s?(?:thousand|million|billion)|[\p{L}]{1,5})?`;

/**
 * Earlier rules have already taken telephone numbers and dates, so a hyphen between numbers here is a range when the
 * ends carry a unit or currency, or when the second number is larger ("pages 12-18"); "978-0" stays a hyphenated code.
 */
export function rangeRule(endWords: (written: string) => string | null): Rule {
  return {
    class: "range",
    pattern: new RegExp(String.raw`(?<![\p{L}\d.,\/-])(${END})(\s?[-–—]\s?)(${END})(?![\p{L}\d-]|[.,]\d)`, "gu"),
    verbalize: (m) => {
      const [first, dash, second] = [m[1]!, m[2]!.trim(), m[3]!];
      const bare = /^[\d,.]+$/;
      if (dash === "-" && bare.test(first) && bare.test(second)) {
        const [low, high] = [Number(first.replace(/,/g, "")), Number(second.replace(/,/g, ""))];
        // "1960-80": a year and the decade's last two digits.
        const shortYear = first.length === 4 && second.length === 2;
        if (!(high > low) && !shortYear) return null;
      }
      // "$10-20" is ten to twenty dollars: the currency written once covers both ends.
      const currency = /^[$£€¥₹]\s?/.exec(first)?.[0];
      if (currency && /^[\d,.]+(?:\s?(?:thousand|million|billion))?$/.test(second)) {
        const [low, high] = [endWords(first.slice(currency.length)), endWords(currency + second)];
        return low && high && `${low} to ${high}`;
      }
      const firstWords = endWords(first);
      const secondWords = endWords(second);
      if (!firstWords || !secondWords) return null;
      return `${firstWords} to ${secondWords}`;
    },
  };
}
