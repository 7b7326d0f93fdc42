/** URLs, emails and file paths, spoken piece by piece: "john@example.com" → "john at example dot com". */
import type { Rule } from "../tagger.ts";
import { digitWords } from "./numbers.ts";

const SYMBOL_WORDS: Record<string, string> = {
  ".": "dot", "@": "at", "/": "slash", "\\": "backslash", ":": "colon", "-": "dash", _: "underscore", "~": "tilde", "?": "question mark",
  "=": "equals", "&": "ampersand", "#": "hash", "%": "percent", "+": "plus", "*": "asterisk",
};

/** Pieces said as letters or as another word, whatever their case in the text. */
const PIECE_WORDS: Record<string, string> = { www: "WWW", http: "HTTP", https: "HTTPS", ftp: "FTP", html: "HTML", htm: "HTM", jpg: "jpeg", pdf: "PDF", png: "PNG", csv: "CSV", json: "JSON", gif: "GIF", txt: "TXT", svg: "SVG" };

/**
 * Top-level domains read as words; others (two-letter country codes, unknown ones) are spelled. A bare domain is
 * recognized in lower case only, so a missing space after a period ("done.It was") is not taken for one.
 */
const WORD_DOMAINS = new Set(["com", "org", "net", "edu", "gov", "info", "biz", "app", "dev", "mil"]);
const DOMAINS = "com|org|net|edu|gov|info|biz|app|dev|mil|io|ai|co|uk|us|ca|de|fr|it|es|nl|eu|jp|cn|in|au|ru|br|ch|se|no|tv|me|ly";

const PIECE = /[\p{L}]+|\d+|[^\p{L}\d]/gu;

function electronicWords(written: string): string {
  const words: string[] = [];
  const pieces = written.match(PIECE) ?? [];
  pieces.forEach((piece, index) => {
    const lower = piece.toLowerCase();
    if (/^\d+$/.test(piece)) words.push(digitWords(piece));
    else if (SYMBOL_WORDS[piece]) words.push(SYMBOL_WORDS[piece]!);
    else if (PIECE_WORDS[lower]) words.push(PIECE_WORDS[lower]!);
    else if (index === pieces.length - 1 && pieces[index - 1] === "." && !WORD_DOMAINS.has(lower) && piece.length <= 3) words.push(piece.toUpperCase());
    else if (/\p{L}/u.test(piece)) words.push(piece);
  });
  return words.join(" ");
}

/** Trailing sentence punctuation belongs to the sentence, not the address. */
const TRAILING = "(?<![.,;:!?)])";
/** Characters an address can hold; quotes, brackets and backticks around it belong to the text. */
const ADDRESS_CHAR = String.raw`[^\s<>"'\x60()\[\]{}]`;

export const electronicRules: Rule[] = [
  {
    class: "electronic",
    pattern: new RegExp(String.raw`\b(?:https?|ftp|file):\/\/${ADDRESS_CHAR}*${TRAILING}`, "gi"),
    verbalize: (m) => electronicWords(m[0]),
  },
  {
    class: "electronic",
    pattern: new RegExp(String.raw`(?<![\w.@-])[\w.+&-]+@[\w-]+(?:\.[\w-]+)+(?:\/${ADDRESS_CHAR}*)?${TRAILING}`, "g"),
    verbalize: (m) => electronicWords(m[0]),
  },
  {
    class: "electronic",
    pattern: new RegExp(String.raw`(?<![\w.@/-])(?:www\.[\w-]+(?:\.[\w-]+)*|[\w-]+(?:\.[\w-]+)*\.(?:${DOMAINS}))(?![\w@-]|\.\w)(?:\/${ADDRESS_CHAR}*)?${TRAILING}`, "g"),
    verbalize: (m) => electronicWords(m[0]),
  },
  {
    // Unix paths ("/usr/local/bin", "~/notes.txt", "src/main.ts") and Windows ones ("C:\Users\ana").
    class: "electronic",
    pattern: new RegExp(String.raw`(?<![\w/.-])(?:~(?:\/[\w.-]+)+|\.{0,2}(?:\/[\w.-]+){2,}|[\w-]+(?:\/[\w.-]+)*\/[\w-]+\.[a-z]{1,5})\/?${TRAILING}(?![\w\/])|(?<![\w])[A-Z]:\\(?:[\w.-]+\\?)+${TRAILING}`, "g"),
    verbalize: (m) => electronicWords(m[0]),
  },
];
