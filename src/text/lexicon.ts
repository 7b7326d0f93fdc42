/**
 * A pronunciation lexicon of alias rules: a written word or phrase and what the model reads instead ("SQL" →
 * "sequel", "Nguyen" → "win"). Matched case-insensitively, as whole words, longest first, before the text is
 * normalized, so an alias may hold numbers or abbreviations of its own. Two formats: the W3C Pronunciation
 * Lexicon (PLS 1.0) with `<alias>` entries, and a two-column tab-separated file (written, then spoken).
 * Phoneme rules are refused: the model reads text, not phonemes.
 */
import { XMLParser } from "fast-xml-parser";

export interface LexiconRule {
  written: string;
  spoken: string;
}

/** A lexicon that cannot be used, saying where and why. */
export class LexiconError extends Error {}

const MAX_RULES = 10_000;
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

export class Lexicon {
  readonly #spoken = new Map<string, string>();
  readonly #pattern: RegExp | undefined;

  constructor(readonly rules: readonly LexiconRule[]) {
    if (rules.length > MAX_RULES) throw new LexiconError(`a lexicon may hold at most ${MAX_RULES} rules (got ${rules.length})`);
    for (const rule of rules) this.#spoken.set(rule.written.toLowerCase(), rule.spoken);
    const written = [...this.#spoken.keys()].sort((a, b) => b.length - a.length).map(escape);
    this.#pattern = written.length > 0 ? new RegExp(`(?<![\\p{L}\\p{N}_])(?:${written.join("|")})(?![\\p{L}\\p{N}_])`, "giu") : undefined;
  }

  get size(): number {
    return this.#spoken.size;
  }

  apply(text: string): string {
    if (!this.#pattern) return text;
    return text.replace(this.#pattern, (match) => this.#spoken.get(match.toLowerCase()) ?? match);
  }

  /** This lexicon's rules, then `other`'s where they name another word. */
  with(other: Lexicon | undefined): Lexicon {
    if (!other || other.size === 0) return this;
    const ownWords = new Set(this.rules.map((rule) => rule.written.toLowerCase()));
    return new Lexicon([...this.rules, ...other.rules.filter((rule) => !ownWords.has(rule.written.toLowerCase()))]);
  }
}

/** A lexicon file's text: PLS when it is XML, else tab-separated. `name` says where errors come from. */
export function parseLexicon(text: string, name: string): Lexicon {
  const body = text.replace(/^\uFEFF/, "");
  return new Lexicon(body.trimStart().startsWith("<") ? plsRules(body, name) : tabSeparatedRules(body, name));
}

function tabSeparatedRules(text: string, name: string): LexiconRule[] {
  const rules: LexiconRule[] = [];
  text.split(/\r?\n/).forEach((line, index) => {
    if (line.trim() === "" || line.trimStart().startsWith("#")) return;
    const [written, spoken, ...rest] = line.split("\t");
    if (spoken === undefined || rest.length > 0 || written!.trim() === "" || spoken.trim() === "") {
      throw new LexiconError(`${name}, line ${index + 1}: expected two columns separated by one tab (written, then spoken)`);
    }
    rules.push({ written: written!.trim(), spoken: spoken.trim() });
  });
  return rules;
}

type XmlNode = Record<string, unknown>;
const asArray = <T>(value: T | T[] | undefined): T[] => (value === undefined ? [] : Array.isArray(value) ? value : [value]);
const textOf = (value: unknown): string => (typeof value === "string" ? value : typeof value === "number" ? String(value) : typeof value === "object" && value !== null && "#text" in value ? String((value as XmlNode)["#text"]) : "");

/** PLS 1.0: each `<lexeme>` has one or more `<grapheme>` and an `<alias>` (its first one is used). */
export function plsRules(xml: string, name: string): LexiconRule[] {
  let document: XmlNode;
  try {
    document = new XMLParser({ ignoreAttributes: false, removeNSPrefix: true, trimValues: true, processEntities: true }).parse(xml, true) as XmlNode;
  } catch (error) {
    throw new LexiconError(`${name} is not well-formed XML: ${error instanceof Error ? error.message : String(error)}`);
  }
  const lexicon = document.lexicon as XmlNode | undefined;
  if (!lexicon) throw new LexiconError(`${name} is not a PLS lexicon: no <lexicon> root element`);
  const rules: LexiconRule[] = [];
  asArray(lexicon.lexeme as XmlNode | XmlNode[] | undefined).forEach((lexeme, index) => {
    const graphemes = asArray(lexeme.grapheme).map(textOf).filter((grapheme) => grapheme.trim() !== "");
    const alias = asArray(lexeme.alias).map(textOf)[0];
    if (graphemes.length === 0) throw new LexiconError(`${name}: lexeme ${index + 1} has no <grapheme>`);
    if (alias === undefined || alias.trim() === "") {
      const what = lexeme.phoneme !== undefined ? "has only a <phoneme>, and phoneme rules are not supported (the model reads text): give an <alias>" : "has no <alias>";
      throw new LexiconError(`${name}: lexeme ${index + 1} (${graphemes[0]}) ${what}`);
    }
    for (const grapheme of graphemes) rules.push({ written: grapheme.trim(), spoken: alias.trim() });
  });
  return rules;
}
