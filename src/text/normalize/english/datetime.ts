/** Dates, years, decades and clock times. */
import type { Rule } from "../tagger.ts";
import { AMPM, MONTH, MONTHS, TIME_ZONES, WEEKDAY, WEEKDAYS, ampmWords, monthNumber, sentenceEndsAfter, spellLetters } from "./patterns.ts";
import { cardinalWords, ordinalWords, pluralOfWords, underHundred, yearWords } from "./numbers.ts";

function weekdayName(written: string): string {
  const lower = written.toLowerCase();
  return WEEKDAYS[lower] ?? lower;
}

function shortYearWords(digits: string): string {
  if (digits.length === 4) return yearWords(Number(digits));
  const n = Number(digits);
  return n < 10 ? `oh ${cardinalWords(digits)}` : underHundred(n);
}

function monthDay(month: number, day: number, year?: string): string | null {
  if (month < 1 || month > 12 || day < 1 || day > 31) return null;
  return [MONTHS[month - 1], ordinalWords(String(day)), year ? shortYearWords(year) : ""].filter(Boolean).join(" ");
}

export function clockWords(hour: number, minute: number, second: number | undefined, ampm: string | undefined): string | null {
  if (hour > 24 || minute > 59) return null;
  const suffix = ampm ? ` ${ampmWords(ampm)}` : "";
  let words: string;
  if (minute === 0) words = ampm ? cardinalWords(String(hour)) : hour > 12 || hour === 0 ? `${cardinalWords(String(hour))} hundred` : `${cardinalWords(String(hour))} o'clock`;
  else words = `${cardinalWords(String(hour))} ${minute < 10 ? `oh ${cardinalWords(String(minute))}` : underHundred(minute)}`;
  if (second !== undefined) words = `${words.replace(/ o'clock$/, "")} and ${cardinalWords(String(second))} ${second === 1 ? "second" : "seconds"}`;
  return words + suffix;
}

function withSentenceEnd(words: string, text: string, end: number, written: string): string {
  return sentenceEndsAfter(text, end, written) ? `${words}.` : words;
}

export const dateRules: Rule[] = [
  {
    class: "date",
    pattern: /(?<![\w-])(\d{4})-(\d{2})-(\d{2})(?![\w-])/g,
    verbalize: (m) => monthDay(Number(m[2]), Number(m[3]), m[1]),
  },
  {
    class: "date",
    pattern: /(?<![\w/.-])(\d{1,2})([/.-])(\d{1,2})\2(\d{4}|\d{2})(?![\w/-]|\.\d)/g,
    verbalize: (m) => {
      const first = Number(m[1]);
      const second = Number(m[3]);
      return first > 12 ? monthDay(second, first, m[4]) : monthDay(first, second, m[4]);
    },
  },
  {
    class: "date",
    pattern: new RegExp(String.raw`(?:\b(${WEEKDAY})\.?,?\s+)?\b(${MONTH})\.?\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?(?![\w:])`, "g"),
    verbalize: (m) => {
      const date = monthDay(monthNumber(m[2]!), Number(m[3]), m[4]);
      return date && (m[1] ? `${weekdayName(m[1])} ${date}` : date);
    },
  },
  {
    class: "date",
    pattern: new RegExp(String.raw`(?<![\w.,])(?:(the)\s+)?(\d{1,2})(?:st|nd|rd|th)?\s+(?:(of)\s+)?(${MONTH})\.?(?:,?\s+(\d{4}))?(?![\w])`, "g"),
    verbalize: (m) => {
      const day = Number(m[2]);
      if (day < 1 || day > 31) return null;
      return [m[1] ? m[1] : "the", ordinalWords(m[2]!), "of", MONTHS[monthNumber(m[4]!) - 1], m[5] ? yearWords(Number(m[5])) : ""].filter(Boolean).join(" ");
    },
  },
  {
    class: "date",
    pattern: new RegExp(String.raw`\b(${MONTH})\.?,?\s+(\d{4})(?![\w])`, "g"),
    verbalize: (m) => `${MONTHS[monthNumber(m[1]!) - 1]} ${yearWords(Number(m[2]))}`,
  },
  {
    class: "date",
    pattern: /(?<![\w$])(\d{1,4})\s?(BCE|BC|AD|CE|B\.C\.E\.|B\.C\.|A\.D\.|C\.E\.)(?![\w])|(?<![\w])(AD|A\.D\.)\s?(\d{1,4})(?![\w])/g,
    verbalize: (m, text) => {
      if (m[3]) return `a d ${m[4]!.length === 4 ? yearWords(Number(m[4])) : cardinalWords(m[4]!)}`;
      const words = `${m[1]!.length === 4 ? yearWords(Number(m[1])) : cardinalWords(m[1]!)} ${spellLetters(m[2]!)}`;
      return withSentenceEnd(words, text, m.index + m[0].length, m[0]);
    },
  },
  {
    class: "date",
    pattern: /(?<![\w$])(?:['’](\d0)|(\d{2}|\d{3}0)|(1\d{2}0|20\d0))['’]?s(?![\w])/g,
    verbalize: (m) => {
      const digits = m[1] ?? m[2] ?? m[3]!;
      if (digits.length === 2) return digits === "00" ? null : pluralOfWords(underHundred(Number(digits)));
      if (digits.length !== 4) return null;
      return pluralOfWords(yearWords(Number(digits)));
    },
  },
];

export const timeRules: Rule[] = [
  {
    class: "time",
    pattern: new RegExp(String.raw`(?<![\w:.])(\d{1,2}):([0-5]\d)(?::([0-5]\d))?(?:\s?(${AMPM}))?(?:\s(${TIME_ZONES})\b)?(?![\w:]|\.\d)`, "g"),
    verbalize: (m, text) => {
      const words = clockWords(Number(m[1]), Number(m[2]), m[3] === undefined ? undefined : Number(m[3]), m[4]);
      if (!words) return null;
      const zoned = m[5] ? `${words} ${spellLetters(m[5])}` : words;
      return m[5] ? zoned : withSentenceEnd(zoned, text, m.index + m[0].length, m[0]);
    },
  },
  {
    class: "time",
    pattern: new RegExp(String.raw`(?<![\w:.])(\d{1,2})\s?(${AMPM})(?:\s(${TIME_ZONES})\b)?`, "g"),
    verbalize: (m, text) => {
      const hour = Number(m[1]);
      if (hour < 1 || hour > 12) return null;
      const words = `${cardinalWords(m[1]!)} ${ampmWords(m[2]!)}`;
      return m[3] ? `${words} ${spellLetters(m[3])}` : withSentenceEnd(words, text, m.index + m[0].length, m[0]);
    },
  },
];

/** A bare four-digit number from 1100 to 2099 reads as a year, as the standard datasets do. */
export const yearRule: Rule = {
  class: "date",
  pattern: /(?<![\w$.,:\/-])(1[1-9]\d\d|20\d\d)(?![\w%°]|[.,]\d)/g,
  verbalize: (m) => yearWords(Number(m[1])),
};
