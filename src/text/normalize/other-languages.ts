/**
 * Languages other than English, through to-words: cardinals, ordinals and money. Its output is Title Case and,
 * for some locales, ends in "Only" on currency; both are undone here.
 */
import { ToWords } from "to-words";
import type { Rule } from "./tagger.ts";

/** A bare language maps to the locale most people mean by it; anything else is tried as "xx-XX". */
const DEFAULT_LOCALES: Record<string, string> = {
  ar: "ar-SA", bn: "bn-IN", de: "de-DE", en: "en-US", es: "es-ES", fa: "fa-IR", fr: "fr-FR", hi: "hi-IN", it: "it-IT", ja: "ja-JP",
  ko: "ko-KR", nb: "nb-NO", no: "nb-NO", nl: "nl-NL", pl: "pl-PL", pt: "pt-BR", ru: "ru-RU", sv: "sv-SE", tr: "tr-TR", uk: "uk-UA",
  vi: "vi-VN", zh: "zh-CN", cs: "cs-CZ", da: "da-DK", el: "el-GR", fi: "fi-FI", he: "he-IL", hu: "hu-HU", id: "id-ID", ro: "ro-RO",
  sk: "sk-SK", ta: "ta-IN", te: "te-IN", th: "th-TH", ur: "ur-PK", ms: "ms-MY", sw: "sw-KE", ca: "ca-ES", hr: "hr-HR", sr: "sr-RS",
};

/** One converter per locale, or null when to-words does not know it (the text then keeps its digits). */
const converters = new Map<string, ToWords | null>();

export function localeOf(language: string): string {
  const [base = "", region] = language.replace(/_/g, "-").split("-");
  const lower = base.toLowerCase();
  if (region) return `${lower}-${region.toUpperCase()}`;
  return DEFAULT_LOCALES[lower] ?? `${lower}-${lower.toUpperCase()}`;
}

export function converterFor(language: string): ToWords | null {
  const locale = localeOf(language);
  let converter = converters.get(locale);
  if (converter === undefined) {
    try {
      converter = new ToWords({ localeCode: locale });
      converter.convert(1);
    } catch {
      converter = null;
    }
    converters.set(locale, converter);
  }
  return converter;
}

function spoken(words: string): string {
  return words.replace(/\s+Only$/i, "").toLocaleLowerCase();
}

/** "1.234,56" or "1,234.56" → 1234.56: the last separator followed by one or two digits is the decimal one. */
function parseAmount(written: string): number | null {
  const decimal = /[.,](\d{1,2})$/.exec(written);
  const whole = (decimal ? written.slice(0, decimal.index) : written).replace(/[.,\s ]/g, "");
  if (!/^\d+$/.test(whole)) return null;
  const value = Number(decimal ? `${whole}.${decimal[1]}` : whole);
  return Number.isFinite(value) ? value : null;
}

/** Currency symbols to the ISO code of the locale that owns them. */
const SYMBOL_CODES: Record<string, string> = { "€": "EUR", $: "USD", "£": "GBP", "¥": "JPY", "₹": "INR", "₽": "RUB", "₩": "KRW", "zł": "PLN" };
const AMOUNT = String.raw`\d{1,3}(?:[.,  ]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?`;
const MONEY = new RegExp(String.raw`([€$£¥₹₽₩])\s?(${AMOUNT})(?![\d])|(?<![\d.,])(${AMOUNT})\s?([€$£¥₹₽₩]|zł)`, "gu");
/** "1.", "2e", "3º", "1er": the common ways other languages write ordinals. */
const ORDINAL = /(?<![\p{L}\d.,])(\d{1,6})(?:\.(?=\s\p{L})|º|ª|er|re|e|ème|o|a)(?![\p{L}\d])/gu;
const CARDINAL = new RegExp(String.raw`(?<![\p{L}\d.,])-?(?:${AMOUNT})(?![\d]|[.,]\d)`, "gu");

export function otherLanguageRules(converter: ToWords): Rule[] {
  const localeCurrency = converter.getLocale().config.currency;
  /** to-words says amounts in its locale's own currency; a foreign symbol keeps its number and the symbol. */
  const isLocal = (symbol: string) => symbol === localeCurrency.symbol || SYMBOL_CODES[symbol] === undefined;
  const moneyWords = (amount: string, symbol: string): string | null => {
    const value = parseAmount(amount);
    if (value === null) return null;
    if (isLocal(symbol)) return spoken(converter.convert(value, { currency: true, doNotAddOnly: true }));
    return `${spoken(converter.convert(value))} ${symbol}`;
  };
  return [
    {
      class: "money",
      pattern: MONEY,
      verbalize: (m) => (m[1] ? moneyWords(m[2]!, m[1]) : moneyWords(m[3]!, m[4]!)),
    },
    {
      class: "ordinal",
      pattern: ORDINAL,
      verbalize: (m) => spoken(converter.toOrdinal(Number(m[1]))),
    },
    {
      class: "cardinal",
      pattern: CARDINAL,
      verbalize: (m) => {
        const negative = m[0].startsWith("-");
        const value = parseAmount(negative ? m[0].slice(1) : m[0]);
        if (value === null) return null;
        return spoken(converter.convert(negative ? -value : value));
      },
    },
  ];
}
