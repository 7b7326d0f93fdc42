/**
 * ElevenLabs' pronunciation dictionaries: named sets of alias rules, each change a new version, referred to by
 * `pronunciation_dictionary_locators` (up to three) on text-to-speech and the sockets. The model reads text, so
 * alias rules apply (through the server's lexicon machinery, before normalization) and phoneme rules are
 * refused with a 400 saying so. Kept in this process's memory, bounded: a restart forgets them, and replicas
 * do not share them (the server-wide --lexicon is the way to give every replica the same rules).
 */
import { randomUUID } from "node:crypto";
import { Lexicon, LexiconError, parseLexicon, type LexiconRule } from "../text/lexicon.ts";
import { ElevenLabsError } from "./schema.ts";

export interface DictionaryRuleInput {
  string_to_replace: string;
  type: "alias" | "phoneme";
  alias?: string;
  phoneme?: string;
  alphabet?: string;
}

interface DictionaryVersion {
  id: string;
  rules: LexiconRule[];
  lexicon: Lexicon;
}

interface Dictionary {
  id: string;
  name: string;
  description?: string;
  creationTimeUnix: number;
  versions: DictionaryVersion[];
}

export interface Locator {
  pronunciation_dictionary_id: string;
  version_id?: string;
}

const MAX_DICTIONARIES = 100;
const MAX_RULES_PER_DICTIONARY = 5_000;
/** Older versions than this many are forgotten: a locator naming one is a 404 saying so. */
const MAX_VERSIONS_KEPT = 20;
export const MAX_LOCATORS = 3;

function versionId(): string {
  return randomUUID().replace(/-/g, "").slice(0, 20);
}

export class PronunciationDictionaries {
  readonly #dictionaries = new Map<string, Dictionary>();

  addFromRules(name: string, rules: readonly DictionaryRuleInput[], description?: string): ReturnType<PronunciationDictionaries["added"]> {
    return this.#add(name, aliasRules(rules), description);
  }

  addFromFile(name: string, pls: string, description?: string): ReturnType<PronunciationDictionaries["added"]> {
    let rules: LexiconRule[];
    try {
      rules = [...parseLexicon(pls, "file").rules];
    } catch (error) {
      if (error instanceof LexiconError) throw new ElevenLabsError(400, "invalid_pronunciation_dictionary", error.message, "file");
      throw error;
    }
    return this.#add(name, rules, description);
  }

  list(): ReturnType<PronunciationDictionaries["metadata"]>[] {
    return [...this.#dictionaries.values()].sort((a, b) => b.creationTimeUnix - a.creationTimeUnix).map((dictionary) => this.metadata(dictionary));
  }

  /** The metadata and the latest version's rules. */
  get(id: string) {
    const dictionary = this.#dictionary(id);
    const rules = dictionary.versions.at(-1)!.rules.map((rule) => ({ type: "alias", string_to_replace: rule.written, alias: rule.spoken, case_sensitive: false, word_boundaries: true }));
    return { ...this.metadata(dictionary), rules };
  }

  /** The version's rules as a PLS document, as ElevenLabs' download gives it. */
  download(id: string, version: string): string {
    const { rules } = this.#version(this.#dictionary(id), version);
    const escape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
    const lexemes = rules.map((rule) => `  <lexeme>\n    <grapheme>${escape(rule.written)}</grapheme>\n    <alias>${escape(rule.spoken)}</alias>\n  </lexeme>`).join("\n");
    return `<?xml version="1.0" encoding="UTF-8"?>\n<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">\n${lexemes}\n</lexicon>\n`;
  }

  /** A new version with `rules` added; a rule for a word already there replaces it. */
  addRules(id: string, rules: readonly DictionaryRuleInput[]): { id: string; version_id: string; version_rules_num: number } {
    const dictionary = this.#dictionary(id);
    const added = aliasRules(rules);
    const replaced = new Set(added.map((rule) => rule.written));
    return this.#newVersion(dictionary, [...dictionary.versions.at(-1)!.rules.filter((rule) => !replaced.has(rule.written)), ...added]);
  }

  removeRules(id: string, written: readonly string[]): { id: string; version_id: string; version_rules_num: number } {
    const dictionary = this.#dictionary(id);
    const removed = new Set(written);
    return this.#newVersion(dictionary, dictionary.versions.at(-1)!.rules.filter((rule) => !removed.has(rule.written)));
  }

  /** The rules the locators name, earlier locators first; a 400/404 naming a locator that names nothing. */
  lexiconFor(locators: readonly Locator[] | undefined, param = "pronunciation_dictionary_locators"): Lexicon | undefined {
    if (!locators || locators.length === 0) return undefined;
    if (locators.length > MAX_LOCATORS) throw new ElevenLabsError(400, "too_many_pronunciation_dictionaries", `at most ${MAX_LOCATORS} pronunciation dictionaries may be given (got ${locators.length})`, param);
    let lexicon: Lexicon | undefined;
    for (const locator of locators) {
      const dictionary = this.#dictionary(locator.pronunciation_dictionary_id, param);
      const version = locator.version_id ? this.#version(dictionary, locator.version_id, param) : dictionary.versions.at(-1)!;
      lexicon = lexicon ? lexicon.with(version.lexicon) : version.lexicon;
    }
    return lexicon;
  }

  added(dictionary: Dictionary) {
    const version = dictionary.versions.at(-1)!;
    return {
      id: dictionary.id,
      name: dictionary.name,
      created_by: "voxedge",
      creation_time_unix: dictionary.creationTimeUnix,
      version_id: version.id,
      version_rules_num: version.rules.length,
      ...(dictionary.description === undefined ? {} : { description: dictionary.description }),
      permission_on_resource: "admin",
    };
  }

  metadata(dictionary: Dictionary) {
    const version = dictionary.versions.at(-1)!;
    return {
      id: dictionary.id,
      latest_version_id: version.id,
      latest_version_rules_num: version.rules.length,
      name: dictionary.name,
      permission_on_resource: "admin",
      created_by: "voxedge",
      creation_time_unix: dictionary.creationTimeUnix,
      ...(dictionary.description === undefined ? {} : { description: dictionary.description }),
    };
  }

  #add(name: string, rules: LexiconRule[], description: string | undefined) {
    if (name.trim() === "") throw new ElevenLabsError(422, "validation_error", "name is required", "name");
    if (this.#dictionaries.size >= MAX_DICTIONARIES) throw new ElevenLabsError(400, "too_many_pronunciation_dictionaries", `this server keeps at most ${MAX_DICTIONARIES} pronunciation dictionaries`);
    const dictionary: Dictionary = { id: versionId(), name: name.trim(), description, creationTimeUnix: Math.floor(Date.now() / 1000), versions: [] };
    this.#newVersion(dictionary, rules);
    this.#dictionaries.set(dictionary.id, dictionary);
    return this.added(dictionary);
  }

  #newVersion(dictionary: Dictionary, rules: LexiconRule[]) {
    if (rules.length > MAX_RULES_PER_DICTIONARY) throw new ElevenLabsError(400, "too_many_rules", `a pronunciation dictionary may hold at most ${MAX_RULES_PER_DICTIONARY} rules (got ${rules.length})`, "rules");
    const version = { id: versionId(), rules, lexicon: new Lexicon(rules) };
    dictionary.versions.push(version);
    if (dictionary.versions.length > MAX_VERSIONS_KEPT) dictionary.versions.shift();
    return { id: dictionary.id, version_id: version.id, version_rules_num: rules.length };
  }

  #dictionary(id: string, param: string | null = null): Dictionary {
    const dictionary = this.#dictionaries.get(id);
    if (!dictionary) throw new ElevenLabsError(404, "pronunciation_dictionary_not_found", `pronunciation dictionary '${id.slice(0, 64)}' not found`, param);
    return dictionary;
  }

  #version(dictionary: Dictionary, id: string, param: string | null = null): DictionaryVersion {
    const version = dictionary.versions.find((candidate) => candidate.id === id);
    if (!version) throw new ElevenLabsError(404, "pronunciation_dictionary_version_not_found", `pronunciation dictionary '${dictionary.id}' has no version '${id.slice(0, 64)}' (the last ${MAX_VERSIONS_KEPT} are kept)`, param);
    return version;
  }
}

/** Alias rules as the lexicon takes them; a phoneme rule is a 400, since the model reads text. */
function aliasRules(rules: readonly DictionaryRuleInput[]): LexiconRule[] {
  return rules.map((rule, index) => {
    if (rule.type === "phoneme") {
      throw new ElevenLabsError(400, "phoneme_rules_unsupported", `rules[${index}] ('${rule.string_to_replace.slice(0, 64)}') is a phoneme rule: the model here reads text, not phonemes; give an alias rule instead`, "rules");
    }
    if (!rule.alias || rule.alias.trim() === "") throw new ElevenLabsError(422, "validation_error", `rules[${index}]: an alias rule needs an alias`, "rules");
    return { written: rule.string_to_replace, spoken: rule.alias };
  });
}
