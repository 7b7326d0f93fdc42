/** Titles and common abbreviations: "Dr." → "doctor", "e.g." → "for example", "No. 5" → "number 5". */
import type { Rule } from "../tagger.ts";
import { cardinalWords } from "./numbers.ts";
import { sentenceEndsAfter } from "./patterns.ts";

/** Abbreviations whose reading does not depend on their neighbours. */
const FIXED: Record<string, string> = {
  "Dr.": "doctor", "Mr.": "mister", "Mrs.": "misses", "Ms.": "miss", "Prof.": "professor", "Jr.": "junior", "Sr.": "senior",
  "Gen.": "general", "Capt.": "captain", "Lt.": "lieutenant", "Sgt.": "sergeant", "Gov.": "governor", "Sen.": "senator", "Rep.": "representative",
  "vs.": "versus", "vs": "versus", "e.g.": "for example", "i.e.": "that is", "etc.": "et cetera", "approx.": "approximately",
  "Ave.": "avenue", "Blvd.": "boulevard", "Rd.": "road", "Mt.": "mount", "Dept.": "department", "Inc.": "incorporated",
  "Ltd.": "limited", "Corp.": "corporation", "Co.": "company", "a.k.a.": "also known as",
  "Rev.": "reverend", "Hon.": "honorable", "Fr.": "father", "Pres.": "president", "Col.": "colonel", "Maj.": "major", "Cpl.": "corporal",
  "Adm.": "admiral", "Supt.": "superintendent", "Mx.": "mix", "Messrs.": "messieurs", "Mme.": "madame",
  "mr.": "mister", "mrs.": "misses", "ms.": "miss", "dr.": "doctor", "prof.": "professor",
  "Ph.D.": "P H D", "PhD": "P H D", "M.D.": "M D", "B.A.": "B A", "M.A.": "M A", "M.B.A.": "M B A", "B.Sc.": "B S C", "M.Sc.": "M S C",
  "D.D.S.": "D D S", "R.N.": "R N", "J.D.": "J D", "U.S.": "U S", "U.S.A.": "U S A", "U.K.": "U K", "U.N.": "U N", "E.U.": "E U",
  "pp.": "pages", "Fig.": "figure", "fig.": "figure", "Vol.": "volume", "vol.": "volume", "Ch.": "chapter", "Sec.": "section",
  "Est.": "established", "est.": "estimated", "Tel.": "telephone", "dept.": "department",
  "ca.": "circa", "et al.": "et al", "cf.": "compare", "viz.": "namely", "w/": "with", "w/o": "without",
};
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const FIXED_PATTERN = Object.keys(FIXED).sort((a, b) => b.length - a.length).map(escape).join("|");

/** Abbreviations that come before a name or a word, so their period never ends a sentence. */
const NEVER_LAST = new Set(["Rev.", "Hon.", "Fr.", "Pres.", "Col.", "Maj.", "Cpl.", "Adm.", "Supt.", "Mx.", "Mme.", "mr.", "mrs.", "ms.", "dr.", "prof.", "pp.", "Fig.", "fig.", "Vol.", "vol.", "ca.", "cf.", "Dr.", "Mr.", "Mrs.", "Ms.", "Prof.", "Gen.", "Capt.", "Lt.", "Sgt.", "Gov.", "Sen.", "Rep.", "vs.", "e.g.", "i.e.", "Mt.", "approx.", "a.k.a."]);

/** The period of an abbreviation that ends a sentence is the sentence's too. */
function keepingSentenceEnd(words: string, text: string, match: RegExpExecArray): string {
  return sentenceEndsAfter(text, match.index + match[0].length, match[0]) ? `${words}.` : words;
}

export const abbreviationRules: Rule[] = [
  {
    // Initials before a name, written without spaces: "J.R.R. Tolkien" → "J R R Tolkien".
    class: "abbreviation",
    pattern: /(?<![\p{L}.])((?:\p{Lu}\.){2,3})(?=\s\p{Lu}\p{Ll})/gu,
    verbalize: (m) => (FIXED[m[1]!] ? null : m[1]!.replace(/\./g, " ").trim()),
  },
  {
    // "c. 1850": circa, before a year only (a lone "c." is too many other things).
    class: "abbreviation",
    pattern: /(?<![\p{L}.])c\.(?=\s?\d{3,4}\b)/gu,
    verbalize: () => "circa",
  },
  {
    // "St." is a street after a name ("Elm St.") and a saint before one ("St. Louis").
    class: "abbreviation",
    pattern: /(?<=\p{Lu}\p{Ll}*\s)St\.?(?![\p{L}])|\bSt\.(?=\s\p{Lu})/gu,
    verbalize: (m, text) => {
      const afterName = /\p{Lu}\p{Ll}*\s$/u.test(text.slice(Math.max(0, m.index - 30), m.index));
      return afterName ? keepingSentenceEnd("street", text, m) : "saint";
    },
  },
  {
    class: "abbreviation",
    pattern: /\b(?:No|no|Nos|nr)\.\s?(\d+)(?![\d.,]\d|\p{L})/gu,
    verbalize: (m) => `number ${cardinalWords(m[1]!)}`,
  },
  {
    class: "abbreviation",
    pattern: new RegExp(String.raw`(?<![\p{L}.])(?:${FIXED_PATTERN})(?![\p{L}])`, "gu"),
    verbalize: (m, text) => {
      const words = FIXED[m[0]]!;
      return m[0].endsWith(".") && !NEVER_LAST.has(m[0]) ? keepingSentenceEnd(words, text, m) : words;
    },
  },
];
