/** Money: "$19.99", "€10.50", "$45 billion", "$5k", "100 USD", "25¢". */
import type { Rule } from "../tagger.ts";
import { cardinalWords, numberWords } from "./numbers.ts";

interface Currency { one: string; many: string; minorOne?: string; minorMany?: string }
const DOLLAR: Currency = { one: "dollar", many: "dollars", minorOne: "cent", minorMany: "cents" };
const CURRENCIES: Record<string, Currency> = {
  $: DOLLAR, US$: DOLLAR, USD: DOLLAR,
  C$: { one: "canadian dollar", many: "canadian dollars", minorOne: "cent", minorMany: "cents" },
  CAD: { one: "canadian dollar", many: "canadian dollars", minorOne: "cent", minorMany: "cents" },
  A$: { one: "australian dollar", many: "australian dollars", minorOne: "cent", minorMany: "cents" },
  AUD: { one: "australian dollar", many: "australian dollars", minorOne: "cent", minorMany: "cents" },
  "£": { one: "pound", many: "pounds", minorOne: "penny", minorMany: "pence" },
  GBP: { one: "pound", many: "pounds", minorOne: "penny", minorMany: "pence" },
  "€": { one: "euro", many: "euros", minorOne: "cent", minorMany: "cents" },
  EUR: { one: "euro", many: "euros", minorOne: "cent", minorMany: "cents" },
  "¥": { one: "yen", many: "yen" }, JPY: { one: "yen", many: "yen" },
  CNY: { one: "yuan", many: "yuan" },
  "₹": { one: "rupee", many: "rupees", minorOne: "paisa", minorMany: "paise" },
  INR: { one: "rupee", many: "rupees", minorOne: "paisa", minorMany: "paise" },
  CHF: { one: "swiss franc", many: "swiss francs", minorOne: "centime", minorMany: "centimes" },
  "₩": { one: "won", many: "won" }, "₽": { one: "ruble", many: "rubles", minorOne: "kopek", minorMany: "kopeks" },
};
const SCALE_SUFFIX: Record<string, string> = { k: "thousand", K: "thousand", m: "million", M: "million", mn: "million", b: "billion", B: "billion", bn: "billion", tn: "trillion", T: "trillion" };
const SYMBOL = String.raw`US\$|C\$|A\$|\$|£|€|¥|₹|₩|₽`;
const CODE = "USD|EUR|GBP|JPY|CNY|INR|CAD|AUD|CHF";
const AMOUNT = String.raw`(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)`;
const SCALE = String.raw`(?:\s(thousand|million|billion|trillion)|(k|K|mn|m|M|bn|b|B|tn|T))?`;

export function moneyWords(amount: string, scale: string | undefined, currency: Currency, negative = false): string {
  const sign = negative ? "minus " : "";
  if (scale) return `${sign}${numberWords(amount)} ${SCALE_SUFFIX[scale] ?? scale} ${currency.many}`;
  const [whole = "", fraction] = amount.replace(/,/g, "").split(".");
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
    pattern: new RegExp(String.raw`(?<![\w$])(-)?(${SYMBOL}|(?:${CODE})\s?)${AMOUNT}${SCALE}(?![\w])`, "g"),
    verbalize: (m) => moneyWords(m[3]!, m[4] ?? m[5], CURRENCIES[m[2]!.trim()]!, Boolean(m[1])),
  },
  {
    class: "money",
    pattern: new RegExp(String.raw`(?<![\w.,])${AMOUNT}${SCALE}\s?(€|£|¢|${CODE})(?![\w])`, "g"),
    verbalize: (m) => {
      if (m[4] === "¢") return `${numberWords(m[1]!)} ${m[1] === "1" ? "cent" : "cents"}`;
      return moneyWords(m[1]!, m[2] ?? m[3], CURRENCIES[m[4]!]!);
    },
  },
];
