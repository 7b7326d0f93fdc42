/** Plain numbers: cardinals, decimals, negatives, ordinals, fractions and percentages. */
import type { Rule } from "../tagger.ts";
import { cardinalWords, digitWords, numberWords, ordinalWords, pluralOfWords } from "./numbers.ts";
import { NUMBER } from "./patterns.ts";

const VULGAR_FRACTIONS: Record<string, [number, number]> = {
  "½": [1, 2], "⅓": [1, 3], "⅔": [2, 3], "¼": [1, 4], "¾": [3, 4], "⅕": [1, 5], "⅖": [2, 5], "⅗": [3, 5], "⅘": [4, 5],
  "⅙": [1, 6], "⅚": [5, 6], "⅛": [1, 8], "⅜": [3, 8], "⅝": [5, 8], "⅞": [7, 8],
};
const VULGAR = Object.keys(VULGAR_FRACTIONS).join("");

/** "1/2" → "one half", "3/4" → "three quarters", "31/32" → "thirty one thirty seconds". */
function simpleFractionWords(numerator: string, denominator: string): string {
  const top = cardinalWords(numerator);
  const many = Number(numerator) !== 1;
  let bottom: string;
  if (denominator === "2") bottom = many ? "halves" : "half";
  else if (denominator === "4") bottom = many ? "quarters" : "quarter";
  else {
    const ordinal = ordinalWords(denominator);
    bottom = many ? `${ordinal}s` : ordinal;
  }
  return `${top} ${bottom}`;
}

/** A fraction, mixed or not: "3 1/4" → "three and one quarter", "2 1/2" → "two and a half", "½". */
export function fractionWords(whole: string | undefined, numerator: string, denominator: string): string | null {
  if (Number(denominator) === 0) return null;
  if (whole === undefined) return simpleFractionWords(numerator, denominator);
  // A mixed number with a half is said "and a half", as people say it.
  const fraction = numerator === "1" && denominator === "2" ? "a half" : simpleFractionWords(numerator, denominator);
  return `${cardinalWords(whole)} and ${fraction}`;
}

function vulgarWords(whole: string | undefined, glyph: string): string {
  const [numerator, denominator] = VULGAR_FRACTIONS[glyph]!;
  return fractionWords(whole, String(numerator), String(denominator))!;
}

const VULGAR_QUANTITY = new RegExp(`^(\\d+)?\\s?([${VULGAR}])$`);

/** The words for a written quantity: a number, a fraction or a mixed number; null when it is none of these. */
export function quantityWords(written: string): string | null {
  const mixed = /^(?:(\d+)\s)?(\d+)\/(\d+)$/.exec(written);
  if (mixed) return fractionWords(mixed[1], mixed[2]!, mixed[3]!);
  const vulgar = VULGAR_QUANTITY.exec(written);
  if (vulgar) return vulgarWords(vulgar[1], vulgar[2]!);
  return numberWords(written);
}

/** Numbers, fractions and mixed numbers as a pattern piece, for rules that put a unit after them. */
export const QUANTITY = String.raw`(?:\d+\s)?\d+\/\d+|\d*\s?[${VULGAR}]|[-−]?(?:${NUMBER})`;

const SUFFIX_OF_LAST_DIGIT: Record<string, string> = { "1": "st", "2": "nd", "3": "rd" };

function ordinalSuffixFits(digits: string, suffix: string): boolean {
  const teen = digits.length > 1 && digits.at(-2) === "1";
  return suffix.toLowerCase() === (teen ? "th" : SUFFIX_OF_LAST_DIGIT[digits.at(-1)!] ?? "th");
}

export const fractionRules: Rule[] = [
  // Even odds.
  { class: "fraction", pattern: /(?<![\w/.,-])50\/50(?![\w/]|[.,]\d)/g, verbalize: () => "fifty fifty" },
  {
    // A score or rating: "4.5/5", "100/100".
    class: "fraction",
    pattern: /(?<![\w\/.,-])(\d+\.\d+|\d+)\/(\d+)(?![\w\/]|[.,]\d)/g,
    verbalize: (m) => {
      const [numerator, denominator] = [m[1]!, m[2]!];
      const rating = numerator.includes(".") || (Number(denominator) >= 10 && Number(numerator) >= Number(denominator));
      return rating ? `${numberWords(numerator)} out of ${cardinalWords(denominator)}` : null;
    },
  },
  {
    // "1/4th" and "1/3rd" are fractions too; the suffix only repeats the denominator.
    class: "fraction",
    pattern: new RegExp(String.raw`(?<![\w/.,-])(?:(\d+)\s)?(\d+)\/(\d+)(?:st|nd|rd|th)?(?![\w/]|[.,]\d)`, "gi"),
    verbalize: (m) => {
      const denominator = Number(m[3]);
      // "24/7" and page counts ("p. 3/250") are not fractions a reader would voice; small denominators are.
      if (denominator < 2 || (denominator > 100 && !m[1])) return null;
      if (m[2] === "24" && m[3] === "7") return "twenty four seven";
      return fractionWords(m[1], m[2]!, m[3]!);
    },
  },
  {
    class: "fraction",
    pattern: new RegExp(String.raw`(?<![\w.,])(?:(\d+)\s?)?([${VULGAR}])`, "g"),
    verbalize: (m) => vulgarWords(m[1], m[2]!),
  },
];

export const percentRule: Rule = {
  class: "percent",
  pattern: new RegExp(String.raw`(?<![\w.,])([-−]?(?:${NUMBER}))\s?%`, "g"),
  verbalize: (m) => {
    const words = numberWords(m[1]!);
    return words && `${words} percent`;
  },
};

export const ordinalRule: Rule = {
  class: "ordinal",
  pattern: /(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(st|nd|rd|th|ST|ND|RD|TH)(?![\p{L}\d])/gu,
  verbalize: (m) => {
    const digits = m[1]!.replace(/,/g, "");
    return ordinalSuffixFits(digits, m[2]!) ? ordinalWords(digits) : null;
  },
};

/** Digits inside a code ("B2A23C", "t2000"): short runs and round thousands as numbers, others digit by digit. */
function codeRunWords(digits: string): string {
  if (digits.length > 1 && digits.startsWith("0")) return digitWords(digits);
  if (digits.length <= 3 || /^[1-9]0{3,}$/.test(digits)) return cardinalWords(digits);
  return digitWords(digits);
}

const PLACE_BEFORE = /\b(?:Apt|Apartment|Suite|Ste|Unit|Room|Rm|Gate|Exit|exit|gate|Platform|Seat|Row|Floor|Flat|Building|Bldg|Terminal|Pier|Dock|Bay|Level|Box)\.?\s$/;
const SCALE_LETTERS: Record<string, string> = { K: "thousand", M: "million", B: "billion", bn: "billion", T: "trillion" };

export const cardinalRules: Rule[] = [
  {
    // A scale letter glued to the number ("1.2M cases", "70B parameters"); "0.1 M" with a space stays a letter.
    class: "cardinal",
    pattern: new RegExp(String.raw`(?<![\p{L}\d.,])(${NUMBER})(K|M|B|bn|T)(?![\p{L}\d])`, "gu"),
    verbalize: (m, text) => {
      // "4K" and "8K" are screen resolutions, said as letters.
      if (m[2] === "K" && (m[1] === "4" || m[1] === "8")) return null;
      // "Apt. 3B", "exit 12B", "Gate 4T": a number and a letter that name a place.
      if (PLACE_BEFORE.test(text.slice(Math.max(0, m.index - 16), m.index))) return null;
      const words = numberWords(m[1]!);
      return words && `${words} ${SCALE_LETTERS[m[2]!]}`;
    },
  },
  {
    // Version and section numbers ("3.12.1", "4.2.1") read part by part; an IP address was taken earlier.
    class: "cardinal",
    pattern: /(?<![\w.,])\d+(?:\.\d+){2,}(?![\w]|\.\d)/g,
    verbalize: (m) => m[0].split(".").map(cardinalWords).join(" point "),
  },
  {
    // A ratio or a score with a colon ("2:1", "16:9"); clock times, whose minutes have two digits, were taken earlier.
    class: "cardinal",
    pattern: /(?<![\w:.,])(\d+):(\d)(?![\d:]|[.,]\d)/g,
    verbalize: (m) => `${cardinalWords(m[1]!)} to ${cardinalWords(m[2]!)}`,
  },
  {
    // A minus sign counts only where it cannot be a hyphen: at the start, after a space or an opening bracket.
    class: "cardinal",
    pattern: new RegExp(String.raw`(?<=^|[\s(\[])[-−](${NUMBER})(?![\d])`, "g"),
    verbalize: (m) => {
      const words = numberWords(m[1]!);
      return words && `minus ${words}`;
    },
  },
  {
    // Decades written without a century ("80s") reach here only when the date rules left them.
    class: "cardinal",
    pattern: /(?<![\p{L}\d.,])(\d0)s(?![\p{L}\d])/gu,
    verbalize: (m) => pluralOfWords(cardinalWords(m[1]!)),
  },
  {
    class: "cardinal",
    // Commas next to a number that are not thousands separators are a list: "1,2,3".
    pattern: new RegExp(String.raw`(?<![\d.]|\.\d)(?:${NUMBER})(?![\d]|\.\d)`, "g"),
    verbalize: (m, text) => {
      const written = m[0];
      const before = text.charAt(m.index - 1);
      // Digits glued to letters are part of a code ("B2A23C", "ab9453").
      if (/\p{L}/u.test(before) && /^\d+$/.test(written)) return codeRunWords(written);
      const words = numberWords(written);
      // In a list written without spaces ("1,2,3") each item after a comma gets one, so the words stay apart.
      return words && before === "," && /\d/.test(text.charAt(m.index - 2)) ? ` ${words}` : words;
    },
  },
];

