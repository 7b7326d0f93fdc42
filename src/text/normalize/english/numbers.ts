/** English number words: cardinals, ordinals, decimals, digit strings and year-style pairs. */
const ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"];
const TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];
const SCALES = ["", "thousand", "million", "billion", "trillion", "quadrillion", "quintillion", "sextillion", "septillion", "octillion", "nonillion", "decillion"];

export function underHundred(n: number): string {
  if (n < 20) return ONES[n]!;
  return TENS[Math.floor(n / 10)]! + (n % 10 ? ` ${ONES[n % 10]}` : "");
}

function underThousand(n: number): string {
  const hundreds = Math.floor(n / 100);
  const rest = n % 100;
  const head = hundreds ? `${ONES[hundreds]} hundred` : "";
  if (!rest) return head;
  return head ? `${head} ${underHundred(rest)}` : underHundred(rest);
}

export function digitWords(digits: string): string {
  return [...digits].filter((c) => c >= "0" && c <= "9").map((c) => ONES[Number(c)]).join(" ");
}

/** A string of digits as a cardinal, without "and"; past the named scales, digit by digit. */
export function cardinalWords(digits: string): string {
  const trimmed = digits.replace(/^0+(?=\d)/, "");
  if (trimmed.length > SCALES.length * 3) return digitWords(digits);
  if (/^0+$/.test(trimmed)) return "zero";
  const groups: number[] = [];
  for (let end = trimmed.length; end > 0; end -= 3) groups.unshift(Number(trimmed.slice(Math.max(0, end - 3), end)));
  const words: string[] = [];
  groups.forEach((group, index) => {
    if (!group) return;
    const scale = SCALES[groups.length - 1 - index]!;
    words.push(scale ? `${underThousand(group)} ${scale}` : underThousand(group));
  });
  return words.join(" ");
}

const ORDINAL_LAST: Record<string, string> = { one: "first", two: "second", three: "third", five: "fifth", eight: "eighth", nine: "ninth", twelve: "twelfth" };

function ordinalOfWords(words: string): string {
  const parts = words.split(" ");
  const last = parts.pop()!;
  const ordinal = ORDINAL_LAST[last] ?? (last.endsWith("y") ? `${last.slice(0, -1)}ieth` : `${last}th`);
  return [...parts, ordinal].join(" ");
}

export function ordinalWords(digits: string): string {
  return ordinalOfWords(cardinalWords(digits));
}

/** Plural of a number word, as in decades: "twenties", "tens", "hundreds". */
export function pluralOfWords(words: string): string {
  const parts = words.split(" ");
  const last = parts.pop()!;
  const plural = last.endsWith("y") ? `${last.slice(0, -1)}ies` : last === "six" ? "sixes" : `${last}s`;
  return [...parts, plural].join(" ");
}

/** A written number: sign, thousands commas, decimals ("-1,234.50", ".5"). Null when it is not one. */
export function numberWords(written: string): string | null {
  const match = /^([-−])?(\d{1,3}(?:,\d{3})+|\d*)(?:\.(\d+))?$/.exec(written);
  if (!match || (!match[2] && !match[3])) return null;
  const [, sign, whole = "", fraction] = match;
  const digits = whole.replace(/,/g, "");
  // Long digit strings without separators, and ones with leading zeros, are read as codes.
  const wholeWords = digits === "" ? "" : (digits.length > 1 && digits.startsWith("0")) || (digits.length > 15 && !whole.includes(",")) ? digitWords(digits) : cardinalWords(digits);
  const parts = [sign ? "minus" : "", wholeWords, fraction !== undefined ? `point ${digitWords(fraction)}` : ""];
  return parts.filter(Boolean).join(" ");
}

/** A year, or a four-digit model number, read in pairs: 1984, 2012, 2005, 1900, 1805. */
export function yearWords(n: number): string {
  if (!Number.isInteger(n) || n < 1000 || n > 9999) return cardinalWords(String(Math.abs(Math.trunc(n))));
  if (n % 1000 === 0 || (n > 2000 && n < 2010)) return cardinalWords(String(n));
  const high = Math.floor(n / 100);
  const low = n % 100;
  if (low === 0) return `${underHundred(high)} hundred`;
  if (low < 10) return `${underHundred(high)} oh ${ONES[low]}`;
  return `${underHundred(high)} ${underHundred(low)}`;
}
