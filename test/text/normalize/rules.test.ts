import { describe, expect, test } from "bun:test";
import { MAX_PIECE_CHARS, normalizeText } from "../../../src/text/normalize/index.ts";
import { applySpans, tag, type Rule } from "../../../src/text/normalize/tagger.ts";
import { romanValue } from "../../../src/text/normalize/english/roman.ts";
import { converterFor, localeOf, otherLanguageRules } from "../../../src/text/normalize/other-languages.ts";

describe("tagger", () => {
  const wide: Rule = { class: "wide", pattern: /\d+-\d+/g, verbalize: (m) => `<${m[0]}>` };
  const narrow: Rule = { class: "narrow", pattern: /\d+/g, verbalize: (m) => `#${m[0]}` };
  const declining: Rule = { class: "declining", pattern: /\d+-\d+/g, verbalize: () => null };

  test("an earlier rule wins the span; a later one only takes what is left", () => {
    const text = "a 1-2 b 3";
    expect(applySpans(text, tag(text, [wide, narrow]))).toBe("a <1-2> b #3");
    expect(applySpans(text, tag(text, [narrow, wide]))).toBe("a #1-#2 b #3");
  });

  test("a rule that declines leaves the span to later rules", () => {
    const text = "1-2";
    expect(applySpans(text, tag(text, [declining, narrow]))).toBe("#1-#2");
  });

  test("a replacement touching letters is spaced off from them", () => {
    const words: Rule = { class: "words", pattern: /\d+/g, verbalize: () => "two" };
    expect(applySpans("B2A", tag("B2A", [words]))).toBe("B two A");
  });

  test("scanning does not move a shared pattern's lastIndex", () => {
    tag("1 2 3", [narrow]);
    expect(narrow.pattern.lastIndex).toBe(0);
  });
});

describe("plain text is kept byte for byte", () => {
  const paragraphs = [
    `She said, "It's late — let's go." He didn't answer; instead he looked away…\n\nThe end.`,
    "Café au lait, naïve façade; ¿Dónde está? ¡Aquí! Straße, Ærø, Œuvre.",
    "日本語の文章です。中文句子，没有数字。한국어 문장입니다. Русский текст, без цифр. نص عربي. עברית. हिन्दी वाक्य।",
    "Emoji 🙂👍🏽🇫🇷 and symbols like ~ ^ | { } < > stay, as do 'single' and ‘curly’ quotes.",
    "I think I can, and I will. MIX, CIVIL, DID, LID, VIVID and MIMIC are words. Malcolm X spoke.",
    "Tabs\tand\r\nWindows line ends, trailing spaces   \nand a last line without a period",
    "Mr Smith and Ms Brown met at the inn in May; it was a may-be, a will-do.",
    "A missing space after a period.It happens.In chats.Me too.",
    "",
  ];
  for (const text of paragraphs) {
    test(JSON.stringify(text.slice(0, 40)), () => {
      expect(normalizeText(text)).toBe(text);
    });
  }
});

describe("Roman numerals", () => {
  test("values of well-formed numerals", () => {
    expect(romanValue("VIII")).toBe(8);
    expect(romanValue("XIV")).toBe(14);
    expect(romanValue("MCMLXXXIV")).toBe(1984);
    expect(romanValue("IIII")).toBeNull();
    expect(romanValue("MIX")).toBe(1009);
    expect(romanValue("CIVIL")).toBeNull();
  });

  test("names, headings and wars", () => {
    expect(normalizeText("Henry VIII")).toBe("Henry the eighth");
    expect(normalizeText("Chapter IV")).toBe("Chapter four");
    expect(normalizeText("World War II")).toBe("World War two");
  });

  test("the pronoun, single letters and ordinary capitals stay", () => {
    for (const text of ["Sam and I", "So I went.", "MIX the DIV", "a CIVIL case", "Malcolm X", "The XL shirt", "In II we trust", "DC Comics", "an IV line"]) {
      expect(normalizeText(text)).toBe(text);
    }
  });
});

describe("other languages through to-words", () => {
  test("a bare language maps to a locale", () => {
    expect(localeOf("fr")).toBe("fr-FR");
    expect(localeOf("de_at")).toBe("de-AT");
    expect(localeOf("es")).toBe("es-ES");
  });

  test("French cardinals, ordinals and money in lower case", () => {
    expect(normalizeText("Il a 21 ans.", { language: "fr" })).toBe("Il a vingt et un ans.");
    expect(normalizeText("le 1er mai", { language: "fr" })).toBe("le premier mai");
    expect(normalizeText("19,99 €", { language: "fr-FR" })).toBe("dix-neuf euros et quatre-vingt-dix-neuf centimes");
  });

  test("German and Spanish cardinals", () => {
    expect(normalizeText("3 Katzen", { language: "de-DE" })).toBe("drei Katzen");
    expect(normalizeText("5 perros", { language: "es" })).toBe("cinco perros");
  });

  test("to-words' trailing \"Only\" on en-US currency is dropped", () => {
    const rules = otherLanguageRules(converterFor("en-US")!);
    expect(applySpans("$5.25", tag("$5.25", rules))).toBe("five dollars and twenty five cents");
  });

  test("an unknown language leaves digits as they are and does not throw", () => {
    expect(normalizeText("I have 5 dogs and $10.", { language: "xx" })).toBe("I have 5 dogs and $10.");
    expect(normalizeText("99 $", { language: "zz-QQ" })).toBe("99 $");
  });

  test("text without digits or currency signs is unchanged in other languages too", () => {
    const text = "« Bonjour ! » dit-elle. Ça va ? L'été, c'est déjà fini…\nÜber Straße — 東京 🙂";
    for (const language of ["fr", "de-DE", "es", "ja", "xx"]) expect(normalizeText(text, { language })).toBe(text);
  });

  test("English variants use the English rules", () => {
    expect(normalizeText("I have 5 dogs", { language: "en-GB" })).toBe("I have five dogs");
  });
});

describe("long text", () => {
  test("is read in pieces that end between sentences, so every written form in it is still read whole", () => {
    const text = "It costs $19.99 on 03/04/2026 at 10:30 pm. ".repeat(60);
    expect(text.length).toBeGreaterThan(4 * MAX_PIECE_CHARS);
    const once = normalizeText("It costs $19.99 on 03/04/2026 at 10:30 pm. ");
    expect(normalizeText(text)).toBe(once.repeat(60));
  });

  test("without written forms it comes out byte for byte, however it is cut", () => {
    const text = "The quick brown fox, \"jumps\" over the lazy dog!\n\n".repeat(50) + "x".repeat(3 * MAX_PIECE_CHARS) + " end";
    expect(normalizeText(text)).toBe(text);
  });

  test("a run with nowhere to cut is cut anyway, and its digits are still read", () => {
    const text = "1-".repeat(4000);
    const spoken = normalizeText(text);
    expect(spoken).not.toMatch(/\d/);
  });
});
