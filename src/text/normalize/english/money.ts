/** Money: "$19.99", "€10.50", "$45 billion", "$5k", "100 USD", "25¢", "$20/mo". */
import type { Rule } from "../tagger.ts";
import { cardinalWords, numberWords } from "./numbers.ts";
import { NUMBER } from "./patterns.ts";
import { PER, perWords } from "./measures.ts";

interface Currency { one: string; many: string; minorOne?: string; minorMany?: string }
const US_DOLLAR: Currency = { one: "dollar", many: "dollars", minorOne: "cent", minorMany: "cents" };
const CANADIAN_DOLLAR: Currency = { one: "canadian dollar", many: "canadian dollars", minorOne: "cent", minorMany: "cents" };
const AUSTRALIAN_DOLLAR: Currency = { one: "australian dollar", many: "australian dollars", minorOne: "cent", minorMany: "cents" };
const POUND: Currency = { one: "pound", many: "pounds", minorOne: "penny", minorMany: "pence" };
const EURO: Currency = { one: "euro", many: "euros", minorOne: "cent", minorMany: "cents" };
const YEN: Currency = { one: "yen", many: "yen" };
const RUPEE: Currency = { one: "rupee", many: "rupees", minorOne: "paisa", minorMany: "paise" };

/** Symbols and ISO codes, longest first where one is a prefix of another. */
const CURRENCIES: Record<string, Currency> = {
  US$: { ...US_DOLLAR, many: "us dollars", one: "us dollar" }, C$: CANADIAN_DOLLAR, A$: AUSTRALIAN_DOLLAR, $: US_DOLLAR, "£": POUND, "€": EURO, "¥": YEN, "₹": RUPEE,
  "₩": { one: "won", many: "won" },
  "₽": { one: "ruble", many: "rubles", minorOne: "kopek", minorMany: "kopeks" },
  USD: US_DOLLAR, CAD: CANADIAN_DOLLAR, AUD: AUSTRALIAN_DOLLAR, GBP: POUND, EUR: EURO, JPY: YEN, INR: RUPEE,
  CNY: { one: "yuan", many: "yuan" },
  CHF: { one: "swiss franc", many: "swiss francs", minorOne: "centime", minorMany: "centimes" },
};
const escape = (text: string) => text.replace(/[$]/g, "\\$");
const SYMBOL = Object.keys(CURRENCIES).filter((key) => !/^[A-Z]{3}$/.test(key)).map(escape).join("|");
const CODE = Object.keys(CURRENCIES).filter((key) => /^[A-Z]{3}$/.test(key)).join("|");

const SCALE_WORDS: Record<string, string> = { k: "thousand", K: "thousand", m: "million", M: "million", mn: "million", b: "billion", B: "billion", bn: "billion", tn: "trillion", T: "trillion" };
const SCALE = String.raw`(?:\s(thousand|million|billion|trillion)|\s?(k|K|mn|m|M|bn|b|B|tn|T)(?![\p{L}]))?`;

export function moneyWords(amount: string, scale: string | undefined, currency: Currency, negative = false): string {
  const sign = negative ? "minus " : "";
  if (scale) return `${sign}${numberWords(amount)} ${SCALE_WORDS[scale] ?? scale} ${currency.many}`;
  const [whole = "", written] = amount.replace(/,/g, "").split(".");
  // "$20.5" is twenty dollars fifty cents and "$20.500" the same; "$20.506" has no cents reading.
  const fraction = written === undefined ? undefined : written.length === 1 ? `${written}0` : written.replace(/^(\d\d)0+$/, "$1");
  const wholeNumber = Number(whole || "0");
  if (fraction !== undefined && (fraction.length !== 2 || !currency.minorMany)) return `${sign}${numberWords(amount)} ${currency.many}`;
  const major = `${cardinalWords(whole || "0")} ${wholeNumber === 1 ? currency.one : currency.many}`;
  const cents = fraction === undefined ? 0 : Number(fraction);
  if (!cents) return sign + major;
  const minor = `${cardinalWords(String(cents))} ${cents === 1 ? currency.minorOne : currency.minorMany}`;
  return sign + (wholeNumber === 0 ? minor : `${major} ${minor}`);
}

export const moneyRules: Rule[] = [
  {
    class: "money",
    pattern: new RegExp(String.raw`(?<![\w$])([-−])?(${SYMBOL}|(?:${CODE})\s?)(${NUMBER})${SCALE}${PER}(?![\w])`, "gu"),
    verbalize: (m) => moneyWords(m[3]!, m[4] ?? m[5], CURRENCIES[m[2]!.trim()]!, Boolean(m[1])) + perWords(m[6]),
  },
  {
    class: "money",
    pattern: new RegExp(String.raw`(?<![\w.,])(${NUMBER})${SCALE}\s?(€|£|¢|${CODE})(?![\w])`, "gu"),
    verbalize: (m) => {
      if (m[4] === "¢") return `${numberWords(m[1]!)} ${m[1] === "1" ? "cent" : "cents"}`;
      return moneyWords(m[1]!, m[2] ?? m[3], CURRENCIES[m[4]!]!);
    },
  },
];
