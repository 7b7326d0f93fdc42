/** Regular-expression pieces the English rules share. */
/** A written number without sign: "1,234,567", "3.14", ".5". */
export const NUMBER = String.raw`(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+`;
export const AMPM = String.raw`(?:[AaPp]\.?\s?[Mm]\.?)(?![A-Za-z])`;
/** Zones of three letters or more, in any case and with or without periods ("est", "E.S.T."). */
export const TIME_ZONES = String.raw`(?:E\.?S\.?T|E\.?D\.?T|C\.?S\.?T|C\.?D\.?T|M\.?S\.?T|M\.?D\.?T|P\.?S\.?T|P\.?D\.?T|UTC|GMT|CEST|CET|BST|JST|AEST|IST)\.?`;
export const MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];
export const MONTH = String.raw`(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)`;
export const WEEKDAYS: Record<string, string> = { mon: "monday", tue: "tuesday", tues: "tuesday", wed: "wednesday", thu: "thursday", thur: "thursday", thurs: "thursday", fri: "friday", sat: "saturday", sun: "sunday" };
export const WEEKDAY = String.raw`(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mon|Tues|Tue|Wed|Thurs|Thur|Thu|Fri|Sat|Sun)`;

export function monthNumber(name: string): number {
  const lower = name.toLowerCase().replace(/\.$/, "");
  return MONTHS.findIndex((month) => month.startsWith(lower.slice(0, 3))) + 1;
}

/** "a.m.", "PM", "p m" → "AM" or "PM"; capitals so that a phonemizer spells them rather than reading "am". */
export function ampmWords(written: string): string {
  return written.toLowerCase().startsWith("a") ? "AM" : "PM";
}

/** A time zone as capital letters, however it was written: "e.s.t" → "EST". */
export function zoneWords(written: string): string {
  return written.replace(/\./g, "").toUpperCase();
}

/** A period consumed by an abbreviation is kept when the sentence ends there. */
export function sentenceEndsAfter(text: string, end: number, written: string): boolean {
  if (!written.endsWith(".")) return false;
  const rest = text.slice(end);
  return rest.trim() === "" || /^\s+[A-Z"“]/.test(rest);
}
