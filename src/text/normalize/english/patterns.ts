/** Regular-expression pieces the English rules share. */
/** A written number without sign: "1,234,567", "3.14", ".5". */
export const NUMBER = String.raw`(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+`;
export const AMPM = String.raw`(?:[AaPp]\.?\s?[Mm]\.?)(?![A-Za-z])`;
export const TIME_ZONES = "EST|EDT|CST|CDT|MST|MDT|PST|PDT|UTC|GMT|CET|CEST|BST|JST|AEST|IST|ET|PT|CT|MT";
export const MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];
export const MONTH = String.raw`(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)`;
export const WEEKDAYS: Record<string, string> = { mon: "monday", tue: "tuesday", tues: "tuesday", wed: "wednesday", thu: "thursday", thur: "thursday", thurs: "thursday", fri: "friday", sat: "saturday", sun: "sunday" };
export const WEEKDAY = String.raw`(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mon|Tues|Tue|Wed|Thurs|Thur|Thu|Fri|Sat|Sun)`;

export function monthNumber(name: string): number {
  const lower = name.toLowerCase().replace(/\.$/, "");
  return MONTHS.findIndex((month) => month.startsWith(lower.slice(0, 3))) + 1;
}

export function spellLetters(letters: string): string {
  return [...letters.toLowerCase()].filter((c) => /\p{L}/u.test(c)).join(" ");
}

/** "a.m.", "PM", "p m" → "a m" or "p m". */
export function ampmWords(written: string): string {
  return written.toLowerCase().startsWith("a") ? "a m" : "p m";
}

/** A period consumed by an abbreviation is kept when the sentence ends there. */
export function sentenceEndsAfter(text: string, end: number, written: string): boolean {
  if (!written.endsWith(".")) return false;
  const rest = text.slice(end);
  return rest.trim() === "" || /^\s+[A-Z"“]/.test(rest);
}
