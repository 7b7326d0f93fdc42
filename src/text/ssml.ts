/**
 * The SSML people use, read into plain text and pauses:
 * - `<break time="500ms"/>` or `<break strength="strong"/>` anywhere in a text (ElevenLabs accepts break tags in
 *   plain text): the text is cut there, and the pause is real silence in the audio (speech/paused-stream.ts);
 * - a whole `<speak>` document: `say-as` (characters / spell-out, cardinal, ordinal, digits, date, time,
 *   telephone), `sub alias`, `p` and `s` as sentence bounds, `prosody rate` as the speed; any other element is
 *   dropped with its text kept, and named so the route can say it ignored it.
 * Malformed SSML is an SsmlError naming the position.
 */
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { cardinalWords, digitWords, ordinalWords } from "./normalize/english/numbers.ts";

/** A stretch of text, then the pause after it (0: none). */
export interface SpokenPart {
  text: string;
  pauseAfterMs: number;
}

export interface SsmlReading {
  parts: SpokenPart[];
  /** A `<prosody rate>` over the whole document, as a speed factor. */
  speed?: number;
  /** Elements that were dropped, their text kept, by name. */
  ignored: string[];
}

export class SsmlError extends Error {}

/** SSML's strengths in milliseconds, as the main engines use them. */
const STRENGTH_MS: Record<string, number> = { none: 0, "x-weak": 100, weak: 250, medium: 500, strong: 750, "x-strong": 1000 };
/** The longest pause one break may ask for; ElevenLabs allows 3 s. */
export const MAX_BREAK_MS = 10_000;
const BREAK_TAG = /<break\b([^>]*?)\/?>(?:\s*<\/break>)?/gi;
const ATTRIBUTE = /([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;

function attributesOf(source: string): Record<string, string> {
  const attributes: Record<string, string> = {};
  for (const match of source.matchAll(ATTRIBUTE)) attributes[match[1]!.toLowerCase()] = match[2] ?? match[3] ?? "";
  return attributes;
}

/** A break's pause in ms from its attributes; an SsmlError for a time that is no SSML time. */
export function breakMs(attributes: Record<string, string>, where: string): number {
  if (attributes.time !== undefined) {
    const time = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s)\s*$/i.exec(attributes.time);
    if (!time) throw new SsmlError(`${where}: break time "${attributes.time}" is not a time such as "500ms" or "1.5s"`);
    const ms = Number(time[1]) * (time[2]!.toLowerCase() === "s" ? 1000 : 1);
    if (ms > MAX_BREAK_MS) throw new SsmlError(`${where}: break time "${attributes.time}" is longer than ${MAX_BREAK_MS / 1000} s`);
    return Math.round(ms);
  }
  const strength = (attributes.strength ?? "medium").toLowerCase();
  const ms = STRENGTH_MS[strength];
  if (ms === undefined) throw new SsmlError(`${where}: break strength "${attributes.strength}" is not one of ${Object.keys(STRENGTH_MS).join(", ")}`);
  return ms;
}

/** Whether the text is an SSML document rather than text that may hold break tags. */
export function isSsmlDocument(text: string): boolean {
  return /^\s*(?:<\?xml[^>]*\?>\s*)?<speak[\s>]/i.test(text);
}

/** SSML elements in plain text (a streamed document is cut into sentences): their tags go, their words stay. */
const SSML_TAG = /<\/?(?:speak|p|s|say-as|prosody|emphasis|phoneme|voice|lang|mark|audio|w|paragraph|sentence|amazon:[\w-]+)(?:\s[^<>]*)?\/?>/gi;
const SUB = /<sub\s[^<>]*?alias\s*=\s*(?:"([^"]*)"|'([^']*)')[^<>]*>[^<]*<\/sub>/gi;

function withoutSsmlTags(text: string): string {
  if (!text.includes("<")) return text;
  return text
    .replace(SUB, (_, double: string | undefined, single: string | undefined) => double ?? single ?? "")
    .replace(SSML_TAG, "")
    .replace(/<\/?sub\b[^<>]*>/gi, "");
}

/** Plain text cut at its break tags (any other SSML tag dropped, its words kept); a text without one is one part. */
export function splitAtBreaks(text: string): SpokenPart[] {
  if (!/<break\b/i.test(text)) return [{ text: withoutSsmlTags(text), pauseAfterMs: 0 }];
  const parts: SpokenPart[] = [];
  let cursor = 0;
  for (const match of text.matchAll(BREAK_TAG)) {
    const ms = breakMs(attributesOf(match[1]!), `break at character ${match.index! + 1}`);
    parts.push({ text: withoutSsmlTags(text.slice(cursor, match.index)), pauseAfterMs: ms });
    cursor = match.index! + match[0].length;
  }
  parts.push({ text: withoutSsmlTags(text.slice(cursor)), pauseAfterMs: 0 });
  return mergeParts(parts);
}

/** Adjacent pauses add up; empty text between them is no part of its own. */
function mergeParts(parts: SpokenPart[]): SpokenPart[] {
  const merged: SpokenPart[] = [];
  for (const part of parts) {
    const last = merged.at(-1);
    if (last && last.pauseAfterMs > 0 && part.text.trim() === "" && merged.length > 0) last.pauseAfterMs = Math.min(MAX_BREAK_MS, last.pauseAfterMs + part.pauseAfterMs);
    else merged.push({ ...part });
  }
  return merged;
}

type Node = Record<string, unknown>;

/** A `<speak>` document read into parts; an SsmlError, naming line and column, when it is not well-formed. */
export function readSsml(document: string): SsmlReading {
  const valid = XMLValidator.validate(document);
  if (valid !== true) throw new SsmlError(`SSML is not well-formed at line ${valid.err.line}, column ${valid.err.col}: ${valid.err.msg}`);
  const nodes = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "", preserveOrder: true, trimValues: false, removeNSPrefix: true, processEntities: true }).parse(document) as Node[];
  const speak = nodes.find((node) => "speak" in node);
  if (!speak) throw new SsmlError("SSML must have <speak> as its root element");
  const reading: SsmlReading = { parts: [{ text: "", pauseAfterMs: 0 }], ignored: [] };
  const rate = prosodyRateOf(speak);
  if (rate !== undefined) reading.speed = rate;
  walk(speak.speak as Node[], reading, 0);
  reading.parts = mergeParts(reading.parts.map((part) => ({ ...part, text: part.text.replace(/\s+/g, " ") })));
  reading.ignored = [...new Set(reading.ignored)];
  return reading;
}

/** A single `<prosody rate>` just inside `<speak>`, wrapping the document, is its speed. */
function prosodyRateOf(speak: Node): number | undefined {
  const children = (speak.speak as Node[]).filter((child) => !("#text" in child && String(child["#text"]).trim() === ""));
  const only = children.length === 1 ? children[0]! : undefined;
  const rate = only && "prosody" in only ? ((only[":@"] as Record<string, string> | undefined)?.rate ?? undefined) : undefined;
  if (rate === undefined) return undefined;
  const named: Record<string, number> = { "x-slow": 0.5, slow: 0.75, medium: 1, fast: 1.25, "x-fast": 1.5, default: 1 };
  if (named[rate] !== undefined) return named[rate];
  const percent = /^\s*(\d+(?:\.\d+)?)%\s*$/.exec(rate);
  if (percent) return Math.min(4, Math.max(0.25, Number(percent[1]) / 100));
  const factor = /^\s*(\d+(?:\.\d+)?)\s*$/.exec(rate);
  if (factor) return Math.min(4, Math.max(0.25, Number(factor[1])));
  throw new SsmlError(`prosody rate "${rate}" is not x-slow, slow, medium, fast, x-fast, a percentage or a number`);
}

function append(reading: SsmlReading, text: string): void {
  reading.parts.at(-1)!.text += text;
}

/** Ends what was said with a full stop unless it already ends a sentence: `<p>` and `<s>` bounds. */
function endSentence(reading: SsmlReading): void {
  const part = reading.parts.at(-1)!;
  const trimmed = part.text.trimEnd();
  if (trimmed !== "" && !/[.!?…:;]["')\]]*$/.test(trimmed)) part.text = `${trimmed}.`;
  part.text += " ";
}

function textOfChildren(children: Node[]): string {
  return children.map((child) => ("#text" in child ? String(child["#text"]) : Object.keys(child).filter((key) => key !== ":@").map((key) => textOfChildren(child[key] as Node[])).join(""))).join("");
}

function walk(children: Node[], reading: SsmlReading, depth: number): void {
  if (depth > 64) throw new SsmlError("SSML is nested more than 64 elements deep");
  for (const child of children) {
    if ("#text" in child) {
      append(reading, String(child["#text"]));
      continue;
    }
    const name = Object.keys(child).find((key) => key !== ":@")!;
    const attributes = (child[":@"] as Record<string, string> | undefined) ?? {};
    const inner = child[name] as Node[];
    switch (name) {
      case "break":
        reading.parts.at(-1)!.pauseAfterMs += breakMs(attributes, "<break>");
        reading.parts.push({ text: "", pauseAfterMs: 0 });
        break;
      case "p":
      case "s":
      case "paragraph":
      case "sentence":
        endSentence(reading);
        walk(inner, reading, depth + 1);
        endSentence(reading);
        break;
      case "sub":
        append(reading, ` ${attributes.alias ?? textOfChildren(inner)} `);
        break;
      case "say-as":
        append(reading, ` ${sayAs(textOfChildren(inner), attributes["interpret-as"] ?? "", attributes.format)} `);
        break;
      case "prosody":
      case "speak":
        walk(inner, reading, depth + 1);
        break;
      default:
        reading.ignored.push(name);
        walk(inner, reading, depth + 1);
    }
  }
}

/** `say-as`: the text as its interpretation reads it; an interpretation the normalizer already reads is passed on. */
function sayAs(text: string, interpretAs: string, format: string | undefined): string {
  const value = text.trim();
  switch (interpretAs.toLowerCase()) {
    case "characters":
    case "spell-out":
    case "letters":
      return [...value.replace(/\s+/g, "")].map((char) => (/\d/.test(char) ? digitWords(char) : char.toUpperCase())).join(" ");
    case "digits":
    case "number_digit":
      return digitWords(value);
    case "cardinal":
    case "number":
      return /^\d+$/.test(value.replace(/,/g, "")) ? cardinalWords(value.replace(/,/g, "")) : value;
    case "ordinal":
      return /^\d+$/.test(value) ? ordinalWords(value) : value;
    case "telephone":
      return value
        .split(/[^\d]+/)
        .filter(Boolean)
        .map(digitWords)
        .join(", ");
    case "date":
      return dateText(value, format);
    default:
      // time, currency, address, and anything else: the normalizer reads the written form.
      return value;
  }
}

/** A date in the order `format` gives ("mdy", "dmy", "ymd", "md", "dm", "ym", "my", "y"), written so the normalizer reads it. */
function dateText(value: string, format: string | undefined): string {
  const fields = value.split(/[-/.\s]+/).filter(Boolean);
  const order = (format ?? "").toLowerCase();
  if (!/^[dmy]{1,3}$/.test(order) || fields.length !== order.length) return value;
  const at = (letter: string) => fields[order.indexOf(letter)];
  const [day, month, year] = [at("d"), at("m"), at("y")];
  const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
  const monthName = month && /^\d+$/.test(month) ? MONTHS[Number(month) - 1] : month;
  return [monthName && day ? `${monthName} ${Number(day)}` : monthName, year].filter(Boolean).join(", ") || value;
}
