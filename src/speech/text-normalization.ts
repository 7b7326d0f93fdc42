/**
 * apply_text_normalization: whether a segment's written forms are rewritten as they are said
 * (src/text/normalize) before the model reads them, and in which language.
 */
import type { TextNormalizationMode } from "../api/speech.ts";
import type { ModelCapabilities } from "../models/contract.ts";
import { normalizeText, normalizeTextInSlices } from "../text/normalize/index.ts";

/** The language normalization assumes for a model that does not say which it speaks. */
const DEFAULT_LANGUAGE = "en";

/**
 * What "auto" means for each kind of model.
 * - neural (Pocket TTS): on. It has no text front end of its own: its tokenizer gets "$19.99" as a symbol and
 *   digits, and the model has to guess how they are said.
 * - classic-fallback (Flite): on as well, by measurement. Flite has its own text front end, but it reads
 *   "03/04/2026" as "zero three slash zero four slash …" and "£3.50" as "three point five zero":
 *   bench/offline-engine-normalization-wer.ts scored 23.0% word error as written against 8.4% normalized
 *   (voice rms, 16 sentences of money, dates, times and years; docs/benchmarks.md).
 */
const AUTO_NORMALIZES: Readonly<Record<ModelCapabilities["kind"], boolean>> = { neural: true, "classic-fallback": true };

export function normalizesText(mode: TextNormalizationMode | undefined, capabilities: ModelCapabilities): boolean {
  const resolved = mode ?? "auto";
  return resolved === "auto" ? AUTO_NORMALIZES[capabilities.kind] : resolved === "on";
}

/** The text the model reads: `text` normalized in the served model's language when the request's mode says so. */
export function spokenText(text: string, mode: TextNormalizationMode | undefined, capabilities: ModelCapabilities): string {
  return normalizesText(mode, capabilities) ? normalizeText(text, { language: capabilities.languages[0] ?? DEFAULT_LANGUAGE }) : text;
}

/** spokenText for long text, letting the event loop turn between slices of the work (`turn`). */
export function spokenTextInSlices(text: string, mode: TextNormalizationMode | undefined, capabilities: ModelCapabilities, turn: () => Promise<void>): Promise<string> {
  return normalizesText(mode, capabilities) ? normalizeTextInSlices(text, { language: capabilities.languages[0] ?? DEFAULT_LANGUAGE }, turn) : Promise.resolve(text);
}

