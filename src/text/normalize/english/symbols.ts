/** Symbols said as words in context: "&", "#1", "@", "+", "*", "=", "a/b". */
import type { Rule } from "../tagger.ts";
import { numberWords } from "./numbers.ts";
import { NUMBER } from "./patterns.ts";

const OPERATORS: Record<string, string> = { "+": "plus", "-": "minus", "−": "minus", "*": "times", "×": "times", "/": "divided by", "÷": "divided by", "=": "equals" };
const OPERAND = String.raw`(?:${NUMBER}|[a-z])`;
const MATH_TOKEN = new RegExp(String.raw`${NUMBER}|[a-z]|[-−+*×÷/=]`, "g");

export const mathRule: Rule = {
  // An equation: operands and operators around "=" ("1-2=5", "y=x +1"); without "=" a hyphen is a range or a dash.
  class: "math",
  pattern: new RegExp(String.raw`(?<![\w.])${OPERAND}(?:\s?[-−+*×÷/=]\s?${OPERAND}){0,8}\s?=\s?${OPERAND}(?:\s?[-−+*×÷/=]\s?${OPERAND}){0,8}(?![\w.])`, "g"),
  verbalize: (m) => {
    const tokens = m[0].match(MATH_TOKEN) ?? [];
    return tokens.map((token) => OPERATORS[token] ?? numberWords(token) ?? token).join(" ");
  },
};

export const symbolRules: Rule[] = [
  {
    class: "symbol",
    pattern: new RegExp(String.raw`(?<![\w.])(${NUMBER})\s?\*\s?(${NUMBER})(?![\w.])`, "g"),
    verbalize: (m) => `${numberWords(m[1]!)} times ${numberWords(m[2]!)}`,
  },
  {
    class: "symbol",
    pattern: new RegExp(String.raw`(?<![\w.])(${NUMBER})\s?\+\s?(${NUMBER})(?![\w.])`, "g"),
    verbalize: (m) => `${numberWords(m[1]!)} plus ${numberWords(m[2]!)}`,
  },
  { class: "symbol", pattern: /(?<=\p{L})\+\+(?!\w)/gu, verbalize: () => "plus plus" },
  { class: "symbol", pattern: /#(?=\d)/g, verbalize: () => "number" },
  { class: "symbol", pattern: /(?<=^|\s)#(?=\p{L})/gu, verbalize: () => "hashtag" },
  { class: "symbol", pattern: /(?<=\s|^)&(?=\s)|(?<=\p{Lu})&(?=\p{Lu})/gu, verbalize: () => "and" },
  { class: "symbol", pattern: /(?<=\s|^)@(?=[\w])|(?<=\d\s?)@(?=\s?\d)/gu, verbalize: () => "at" },
  {
    // A currency or percent sign standing alone is named: "$ and %".
    class: "symbol",
    pattern: /(?<=^|\s)[$%](?=\s|$)/g,
    verbalize: (m) => (m[0] === "$" ? "dollar" : "percent"),
  },
  {
    // "upgrade/update" reads with "slash"; "and/or" and "either/or" are said as they are.
    class: "symbol",
    pattern: /(?<![\p{L}\d\/.])(\p{L}{2,})(?:\/| \/ )(\p{L}{2,}(?:\/\p{L}{2,})*)(?![\p{L}\d\/]|\.\p{L})/gu,
    verbalize: (m) => (/^(?:and|either|he|his|she)\s?\/\s?(?:or|she|her|him)$/i.test(m[0]) ? null : m[0].split(/\s?\/\s?/).join(" slash ")),
  },
];
