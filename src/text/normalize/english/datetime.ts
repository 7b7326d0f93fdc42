/** Dates, years, decades and clock times. */
import type { Rule } from "../tagger.ts";
import { AMPM, MONTH, MONTHS, TIME_ZONES, WEEKDAY, WEEKDAYS, ampmWords, monthNumber, sentenceEndsAfter, zoneWords } from "./patterns.ts";
import { cardinalWords, ordinalWords, pluralOfWords, underHundred, yearWords } from "./numbers.ts";

/** Month names that are also everyday words; written in lower case they are the words ("I will march 5 miles"). */
const WORD_MONTHS = new Set(["may", "march", "mar"]);
const isWordMonth = (written: string) => WORD_MONTHS.has(written);

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

function dayOfMonth(day: number, month: number, year?: string): string | null {
  if (month < 1 || month > 12 || day < 1 || day > 31) return null;
  return ["the", ordinalWords(String(day)), "of", MONTHS[month - 1], year ? shortYearWords(year) : ""].filter(Boolean).join(" ");
}

function unitCount(value: number, unit: string): string {
  return `${cardinalWords(String(value))} ${value === 1 ? unit : `${unit}s`}`;
}

/** "10:30" → "ten thirty", "01:00" → "one o'clock", "14:10:30" → "fourteen hours ten minutes thirty seconds". */
function clockWords(hour: number, minute: number, second: number | undefined, ampm: string | undefined): string | null {
  if (hour > 24 || minute > 59) return null;
  const suffix = ampm ? ` ${ampmWords(ampm)}` : "";
  if (second !== undefined) return `${unitCount(hour, "hour")} ${unitCount(minute, "minute")} and ${unitCount(second, "second")}${suffix}`;
  const hourWords = cardinalWords(String(hour));
  // The 24-hour clock on the hour is said "sixteen hundred"; "o'clock" belongs to the 12-hour one.
  if (minute === 0) return ampm ? hourWords + suffix : hour > 12 ? `${hourWords} hundred` : hour === 0 ? "midnight" : `${hourWords} o'clock`;
  return `${hourWords} ${minute < 10 ? `oh ${cardinalWords(String(minute))}` : underHundred(minute)}${suffix}`;
}

function withSentenceEnd(words: string, text: string, end: number, written: string): string {
  return sentenceEndsAfter(text, end, written) ? `${words}.` : words;
}

/** Denominators of the fractions people write; "12/25", with another denominator and a month first, is a date. */
const FRACTION_DENOMINATORS = new Set([2, 3, 4, 5, 6, 8, 10, 12, 16, 32, 64, 100]);

/** Dates written with digits and separators only; they go before ranges, which would read their hyphens as "to". */
export const numericDateRules: Rule[] = [
  {
    class: "date",
    pattern: /(?<![\w-])(\d{4})([-/.])(\d{1,2})\2(\d{1,2})(?![\w-]|\.\d)/g,
    verbalize: (m) => monthDay(Number(m[3]), Number(m[4]), m[1]),
  },
  {
    class: "date",
    pattern: /(?<![\w/.-])(\d{1,2})([/.-])(\d{1,2})\2(\d{4}|\d{2})(?![\w/-]|\.\d)/g,
    verbalize: (m) => {
      const first = Number(m[1]);
      const second = Number(m[3]);
      // Month first unless the first number cannot be a month; a day first is read "the fifth of May".
      return first > 12 ? dayOfMonth(first, second, m[4]) : monthDay(first, second, m[4]);
    },
  },
  {
    // A month and a day without a year: "12/25".
    class: "date",
    pattern: /(?<![\w\/.,-])(\d{1,2})\/(\d{1,2})(?![\w\/]|[.,]\d)/g,
    verbalize: (m) => {
      const [month, day] = [Number(m[1]), Number(m[2])];
      if (FRACTION_DENOMINATORS.has(day) || month < 1 || month > 12 || day < 1 || day > 31) return null;
      return monthDay(month, day);
    },
  },
];

/** Dates with month names, eras and decades. */
export const dateRules: Rule[] = [
  {
    // "Mon–Fri" on opening hours.
    class: "date",
    pattern: new RegExp(String.raw`\b(${WEEKDAY})\.?\s?[-–]\s?(${WEEKDAY})\b\.?`, "g"),
    verbalize: (m, text) => withSentenceEnd(`${weekdayName(m[1]!)} to ${weekdayName(m[2]!)}`, text, m.index + m[0].length, m[0]),
  },
  {
    class: "date",
    pattern: new RegExp(String.raw`(?:\b(${WEEKDAY})\.?,?\s+)?\b(${MONTH})\.?(?:\s+|-)(\d{1,2})(?:st|nd|rd|th)?(?:\s?[-–]\s?(\d{1,2})(?:st|nd|rd|th)?)?(?:(?:,?\s+|-)(\d{4}))?(?![\w:]|[.,]\d)`, "gi"),
    verbalize: (m) => {
      if (isWordMonth(m[2]!)) return null;
      const date = monthDay(monthNumber(m[2]!), Number(m[3]), m[5]);
      if (!date) return null;
      // "Oct 5-6": the last day of the span follows the first.
      const lastDay = m[4] === undefined ? "" : Number(m[4]) > Number(m[3]) && Number(m[4]) <= 31 ? m[4] : null;
      if (lastDay === null) return null;
      const span = lastDay ? date.replace(ordinalWords(m[3]!), `${ordinalWords(m[3]!)} to ${ordinalWords(lastDay)}`) : date;
      return m[1] ? `${weekdayName(m[1])} ${span}` : span;
    },
  },
  {
    class: "date",
    pattern: new RegExp(String.raw`(?<![\w.,])(?:(the)\s+)?(\d{1,2})(?:st|nd|rd|th)?\s+(?:(of)\s+)?(${MONTH})\.?(?:,?\s+(\d{4}))?(?![\w])`, "gi"),
    verbalize: (m) => {
      const day = Number(m[2]);
      // "17 may 2010": a year after a lower-case "may" shows it is the month.
      if (day < 1 || day > 31 || (isWordMonth(m[4]!) && !m[5])) return null;
      return [m[1] ? m[1] : "the", ordinalWords(m[2]!), "of", MONTHS[monthNumber(m[4]!) - 1], m[5] ? yearWords(Number(m[5])) : ""].filter(Boolean).join(" ");
    },
  },
  {
    class: "date",
    pattern: new RegExp(String.raw`\b(${MONTH})\.?,?\s+(\d{4})(?![\w])`, "gi"),
    verbalize: (m) => (isWordMonth(m[1]!) ? null : `${MONTHS[monthNumber(m[1]!) - 1]} ${yearWords(Number(m[2]))}`),
  },
  {
    class: "date",
    pattern: /(?<![\w$])(\d{1,4})\s?(BCE|BC|AD|CE|B\.C\.E\.|B\.C\.|A\.D\.|C\.E\.)(?![\w])|(?<![\w])(AD|A\.D\.)\s?(\d{1,4})(?![\w])/g,
    verbalize: (m, text) => {
      if (m[3]) return `AD ${m[4]!.length === 4 ? yearWords(Number(m[4])) : cardinalWords(m[4]!)}`;
      const words = `${m[1]!.length === 4 ? yearWords(Number(m[1])) : cardinalWords(m[1]!)} ${m[2]!.replace(/\./g, "")}`;
      return withSentenceEnd(words, text, m.index + m[0].length, m[0]);
    },
  },
];

const ZONE = String.raw`(?:\s?(${TIME_ZONES})(?![\w]))?`;

export const timeRules: Rule[] = [
  {
    class: "time",
    pattern: new RegExp(String.raw`(?<![\w:.])(\d{1,2}):([0-5]\d)(?::([0-5]\d))?(?:\s?(${AMPM}))?${ZONE}(?![\w:]|\.\d)`, "gi"),
    verbalize: (m, text) => {
      const words = clockWords(Number(m[1]), Number(m[2]), m[3] === undefined ? undefined : Number(m[3]), m[4]);
      if (!words) return null;
      return withSentenceEnd(m[5] ? `${words} ${zoneWords(m[5])}` : words, text, m.index + m[0].length, m[0]);
    },
  },
  {
    // "1.59 p.m.": a period between hour and minute is a time only when am or pm follows.
    class: "time",
    pattern: new RegExp(String.raw`(?<![\w:.])(\d{1,2})\.([0-5]\d)\s?(${AMPM})${ZONE}`, "gi"),
    verbalize: (m, text) => {
      const words = clockWords(Number(m[1]), Number(m[2]), undefined, m[3]);
      if (!words) return null;
      return withSentenceEnd(m[4] ? `${words} ${zoneWords(m[4])}` : words, text, m.index + m[0].length, m[0]);
    },
  },
  {
    class: "time",
    pattern: new RegExp(String.raw`(?<![\w:.])(\d{1,2})\s?(${AMPM})${ZONE}`, "gi"),
    verbalize: (m, text) => {
      const hour = Number(m[1]);
      if (hour < 1 || hour > 12) return null;
      const words = `${cardinalWords(m[1]!)} ${ampmWords(m[2]!)}`;
      return withSentenceEnd(m[3] ? `${words} ${zoneWords(m[3])}` : words, text, m.index + m[0].length, m[0]);
    },
  },
];

/** Quarters of a year: "Q3 2024", "2Q22". */
export const quarterRule: Rule = {
  class: "date",
  pattern: /\bQ([1-4])\s(\d{4})(?![\w])|(?<![\w.])([1-4])Q(\d{2}|\d{4})(?![\w])/g,
  verbalize: (m) => `the ${ordinalWords(m[1] ?? m[3]!)} quarter of ${shortYearWords(m[2] ?? m[4]!)}`,
};

/** Decades ("the 1980s", "'90s"); they come after ranges, so "1960s-80s" is one range. */
export const decadeRule: Rule = {
  class: "date",
  pattern: /(?<![\w$])(?:['’](\d0)|(\d{2}|\d{3}0)|(1\d{2}0|20\d0))(?:['’]?| (?=s\b))s(?![\w])/g,
  verbalize: (m) => {
    const digits = m[1] ?? m[2] ?? m[3]!;
    // "1980 s" is a decade written loosely; "80 s" is eighty seconds.
    if (m[0].includes(" ") && digits.length !== 4) return null;
    if (digits.length === 2) return digits === "00" ? null : pluralOfWords(underHundred(Number(digits)));
    if (digits.length !== 4) return null;
    return pluralOfWords(yearWords(Number(digits)));
  },
};

/** A bare four-digit number from 1100 to 2099 reads as a year, as the standard datasets do. */
/** A year with its era: "340 A.D." → "three forty AD", "44 BC" → "forty four BC". */
export const eraYearRule: Rule = {
  class: "date",
  pattern: /(?<![\w.,])(\d{1,4})\s?(A\.?D\.?|B\.?C\.?E?\.?|C\.?E\.?)(?![\p{L}])/gu,
  verbalize: (m) => {
    const digits = m[1]!;
    const year = Number(digits);
    const words = digits.length === 3 ? `${cardinalWords(digits[0]!)} ${year % 100 === 0 ? "hundred" : year % 100 < 10 ? `oh ${cardinalWords(String(year % 100))}` : underHundred(year % 100)}` : yearWords(year);
    return `${words} ${m[2]!.replace(/\./g, "").toUpperCase()}`;
  },
};

/** Where a number of four digits outside 1100–2099 is still a year: "in 1066", "by 2100", "c. 1050". */
export const contextYearRule: Rule = {
  class: "date",
  pattern: /(?<=\b(?:[Ii]n|[Bb]y|[Ss]ince|[Uu]ntil|[Tt]ill|[Bb]efore|[Aa]fter|[Ff]rom|[Cc]irca|[Aa]round|[Yy]ear|[Ss]ummer|[Ww]inter|[Ss]pring|[Aa]utumn|AD|BC|ca\.|c\.)\s)(1[0-9]\d\d|2[0-9]\d\d)(?![\w%°]|[.,]\d|\s?(?:%|percent|people|times|items|files|units|years|dollars|euros|miles|km|kg))/g,
  verbalize: (m) => yearWords(Number(m[1])),
};

export const yearRule: Rule = {
  class: "date",
  // Not after "#": "bug #1234" is a number.
  pattern: /(?<![\w$.,:\/#-])(1\d\d\d|20\d\d)(?![\w%°]|[.,]\d)/g,
  verbalize: (m) => yearWords(Number(m[1])),
};
