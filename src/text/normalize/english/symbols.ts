/** Symbols said as words in context: "&", "#1", "@", "+", "*", "=", "a/b". */
import type { Rule } from "../tagger.ts";
import { digitWords, numberWords } from "./numbers.ts";
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

const GREEK: Record<string, string> = {
  α: "alpha", β: "beta", γ: "gamma", δ: "delta", ε: "epsilon", ζ: "zeta", η: "eta", θ: "theta", ι: "iota", κ: "kappa", λ: "lambda", μ: "mu",
  ν: "nu", ξ: "xi", ο: "omicron", π: "pi", ρ: "rho", σ: "sigma", ς: "sigma", τ: "tau", υ: "upsilon", φ: "phi", χ: "chi", ψ: "psi", ω: "omega",
  Α: "alpha", Β: "beta", Γ: "gamma", Δ: "delta", Ε: "epsilon", Ζ: "zeta", Η: "eta", Θ: "theta", Ι: "iota", Κ: "kappa", Λ: "lambda", Μ: "mu",
  Ν: "nu", Ξ: "xi", Ο: "omicron", Π: "pi", Ρ: "rho", Σ: "sigma", Τ: "tau", Υ: "upsilon", Φ: "phi", Χ: "chi", Ψ: "psi", Ω: "omega",
};
const KEYS: Record<string, string> = { Ctrl: "control", Cmd: "command", Alt: "alt", Shift: "shift", Option: "option", Opt: "option", Win: "windows", Super: "super", Fn: "function", Esc: "escape" };
const TAX_PLANS: Record<string, string> = { "401": "four oh one", "403": "four oh three", "457": "four fifty seven" };
/** Signs said the same wherever they stand. */
const SIGNS: Record<string, string> = {
  "±": "plus or minus", "≈": "approximately", "≤": "less than or equal to", "≥": "greater than or equal to", "≠": "not equal to",
  "→": "to", "⇒": "implies", "←": "from", "∞": "infinity", "√": "square root of", "‰": "per mille", "§": "section", "¶": "paragraph",
  "©": "copyright", "®": "registered", "™": "trademark", "✓": "check", "✔": "check", "✗": "cross", "•": ",", "…": "...",
};

/** Powers, before dimensions would read the "x" of "3×10^8" as "by": "three times ten to the power of eight". */
export const powerRule: Rule = {
  class: "symbol",
  pattern: new RegExp(String.raw`(?<![\w.])(?:(${NUMBER})\s?[×x*]\s?)?(${NUMBER})\^(-?\d+)(?![\w.])`, "g"),
  verbalize: (m) => `${m[1] ? `${numberWords(m[1])} times ` : ""}${numberWords(m[2]!)} to the power of ${m[3]!.startsWith("-") ? "minus " : ""}${numberWords(m[3]!.replace("-", ""))}`,
};

export const symbolRules: Rule[] = [
  {
    // A Greek letter on its own (a variable, a constant, a grade), not a Greek word.
    class: "symbol",
    pattern: /(?<![\u0370-\u03FF\u1F00-\u1FFF])[\u0391-\u03A9\u03B1-\u03C9](?![\u0370-\u03FF\u1F00-\u1FFF])/gu,
    verbalize: (m) => GREEK[m[0]] ?? null,
  },
  { class: "symbol", pattern: /[±≈≤≥≠→⇒←∞√‰§¶©®™✓✔✗•]/gu, verbalize: (m) => SIGNS[m[0]] ?? null },
  { class: "symbol", pattern: /(?<=[\p{L}\d)])²/gu, verbalize: () => " squared" },
  { class: "symbol", pattern: /(?<=[\p{L}\d)])³/gu, verbalize: () => " cubed" },
  { class: "symbol", pattern: /(?<=\s)@(?=\s)|(?<=\d)@(?![\w])/g, verbalize: () => "at" },
  // Keyboard shortcuts: "Ctrl+C" → "control plus C".
  {
    class: "symbol",
    pattern: /\b(Ctrl|Cmd|Alt|Shift|Option|Opt|Win|Super|Fn|Esc)\+(?=\w)/g,
    verbalize: (m) => `${KEYS[m[1]!]} plus`,
  },
  // "Node 18+", "ages 21+": at least.
  { class: "symbol", pattern: /(?<=\d)\+(?![\w+])/g, verbalize: () => "plus" },
  // "3x faster", "2.5x more": times, before a comparison; elsewhere ("a 10x engineer") the "x" is said.
  { class: "symbol", pattern: new RegExp(String.raw`(?<![\w.])(${NUMBER})\s?[x×](?=\s(?:faster|slower|more|less|fewer|bigger|smaller|larger|higher|lower|cheaper|better|worse|as|the)\b)`, "g"), verbalize: (m) => `${numberWords(m[1]!)} times` },
  // Retirement plans are named by their section of the tax code: "four oh one k".
  { class: "symbol", pattern: /\b(401|403|457)\s?\(([kb])\)/g, verbalize: (m) => `${TAX_PLANS[m[1]!]} ${m[2]}` },
  // The emergency number is said digit by digit ("Porsche 911" is not called).
  { class: "symbol", pattern: /(?<=\b(?:[Cc]all|[Cc]alled|[Cc]alling|[Dd]ial|[Dd]ialed|[Tt]ext)\s)911\b/g, verbalize: () => "nine one one" },
  // The last digits of a card or an account are said one by one.
  { class: "symbol", pattern: /(?<=\bending (?:in|with)\s)\d{4}\b/g, verbalize: (m) => digitWords(m[0]) },
  // Left by the rules before: an operator between spaces whose operands are not numbers or single letters.
  { class: "symbol", pattern: /(?<=\s)=(?=\s)/g, verbalize: () => "equals" },
  { class: "symbol", pattern: /(?<=\s)\+(?=\s)/g, verbalize: () => "plus" },
  { class: "symbol", pattern: /(?<=\s|^)~(?=\s?\d)/g, verbalize: () => "about " },
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
