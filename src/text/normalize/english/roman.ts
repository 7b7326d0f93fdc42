/** Roman numerals in names and headings: "Henry VIII" → "Henry the eighth", "Chapter IV" → "chapter four". */
import type { Rule } from "../tagger.ts";
import { cardinalWords, ordinalWords } from "./numbers.ts";

const VALUES: Record<string, number> = { I: 1, V: 5, X: 10, L: 50, C: 100, D: 500, M: 1000 };
/** Well-formed numerals only, so words made of the same letters ("MIX", "CIVIL", "DID") are not numbers. */
const WELL_FORMED = /^M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})$/;

export function romanValue(numeral: string): number | null {
  if (!numeral || !WELL_FORMED.test(numeral)) return null;
  let total = 0;
  for (let index = 0; index < numeral.length; index++) {
    const value = VALUES[numeral[index]!]!;
    const next = VALUES[numeral[index + 1] ?? ""] ?? 0;
    total += value < next ? -value : value;
  }
  return total;
}

/** Words after which a numeral counts things: "Chapter IV", "World War II", "Super Bowl LVII". */
const HEADINGS = String.raw`Chapter|Part|Book|Volume|Vol\.|Act|Scene|Section|Article|Phase|Stage|Level|Season|Episode|Title|Appendix|Figure|Table|Type|Class|Category|Grade|Round|Psalm|Canto|World War|Super Bowl|Star Wars(?: Episode)?|Final Fantasy|Rocky|Apollo|Vatican`;

/**
 * Numerals after a capitalized name are regnal ("Louis XIV", "Elizabeth II"); only numerals of two letters or more,
 * made of I, V and X, so the pronoun "I", single letters ("Malcolm X") and words like "MIX" stay as written.
 */
const REGNAL = /^(?:X{0,3})(?:IX|IV|V?I{0,3})$/;
/** Monarchs and popes after whose name a lone "I" is "the first", unless a verb shows it is the pronoun. */
const FIRST_OF = /\b(?:Elizabeth|James|Charles|Henry|Edward|George|William|Richard|Louis|Francis|Peter|Catherine|Napoleon|Alexander|Nicholas|Philip|Frederick|Leopold|Mary|Anne|Victoria|Ferdinand|Isabella|Leo|Pius|Gregory|Benedict|Clement|Innocent|John Paul)\s+I(?![\p{L}\d'’-])(?!\s+(?:am|was|had|have|think|thought|know|knew|will|would|can|could|did|do|don't|mean|guess|said|say|saw|see|went|want|love|like|need|feel|hope|believe|told|got|get)\b)/gu;

const NOT_NAMES = new Set(["The", "A", "An", "In", "On", "At", "Of", "For", "And", "But", "Or", "To", "By", "With", "From", "As", "If", "So", "When", "Then", "This", "That", "Is", "Was"]);

export const romanRules: Rule[] = [
  {
    class: "roman",
    pattern: FIRST_OF,
    verbalize: (m) => `${m[0].slice(0, -1).trimEnd()} the first`,
  },
  {
    class: "roman",
    pattern: new RegExp(String.raw`\b(${HEADINGS})\s+([IVXLCDM]+)(?![\p{L}\d'’-])`, "giu"),
    verbalize: (m, text) => {
      const [heading, numeral] = [m[1]!, m[2]!];
      // "For the most part I agree": a lower-case heading, or "I" running on into a sentence, is the pronoun.
      if (heading[0] !== heading[0]!.toUpperCase() || numeral !== numeral.toUpperCase()) return null;
      if (numeral === "I" && /^\s+\p{Ll}/u.test(text.slice(m.index + m[0].length))) return null;
      const value = romanValue(numeral);
      return value === null ? null : `${heading} ${cardinalWords(String(value))}`;
    },
  },
  {
    class: "roman",
    pattern: /\b(\p{Lu}\p{Ll}+)\s+([IVX]{2,})(?![\p{L}\d'’-])/gu,
    verbalize: (m) => {
      if (NOT_NAMES.has(m[1]!) || !REGNAL.test(m[2]!)) return null;
      const value = romanValue(m[2]!);
      return value === null ? null : `${m[1]} the ${ordinalWords(String(value))}`;
    },
  },
];
