/**
 * The job the engine runs for one utterance, built one way for the server's core (service.ts) and for the page's
 * engine (browser/page/engine-worker.ts): the same text, voice and seed make the same job, and so the same
 * samples, on either.
 */
import type { TextNormalizationMode } from "../api/speech.ts";
import { badRequest } from "../api/errors.ts";
import { maxFramesForInput } from "../engine/request.ts";
import type { SpeechModel, SynthesisJob } from "../models/contract.ts";
import { spokenText } from "./text-normalization.ts";
import { readMarkdown, type MarkdownReadingOptions } from "../text/markdown.ts";
import type { Lexicon } from "../text/lexicon.ts";
import { isSsmlDocument, readSsml, splitAtBreaks, SsmlError, type SpokenPart } from "../text/ssml.ts";
import type { UtterancePart } from "./paused-stream.ts";

/** What an utterance asks for once its voice is known; the text is as sent (trimmed), before normalization. */
export interface UtteranceRequest {
  text: string;
  normalization?: TextNormalizationMode;
  /** A built-in voice; a cloned voice (the job's voicePrompt, which the caller adds) speaks over the model's default one. */
  builtInVoice?: string;
  language?: string;
  seed?: bigint;
  /** The caller's own cap on frames; the input's length caps them in any case. */
  maxNewTokens?: number;
  instructions?: string;
  /** Alias rules applied after markdown is read and before normalization. */
  lexicon?: Lexicon;
  /** How markdown in the text is read; undefined speaks it as sent. */
  markdown?: MarkdownReadingOptions;
  /** The model's own parameters, as its paramsSchema parsed them. */
  extraParams: Record<string, unknown>;
}

export interface UtteranceJob {
  job: Omit<SynthesisJob, "signal" | "voicePrompt">;
  /** Part of the text was left out: a script the model does not read. */
  textDropped: boolean;
  /** The utterance cut by SSML breaks, in order; absent when it has none (then `job` is the whole of it). */
  parts?: UtterancePart[];
  /** A `<prosody rate>` around a whole SSML document. */
  ssmlSpeed?: number;
  /** SSML elements dropped with their text kept. */
  ignoredSsml: string[];
}

/** Something to say: a letter or a digit. */
const SPEAKABLE = /[\p{L}\p{N}]/u;

/** The job for `request` on `model`; a 400 when the model could read none of the text's letters and digits. */
export function utteranceJob(model: Pick<SpeechModel, "capabilities" | "readableText">, request: UtteranceRequest): UtteranceJob {
  const capabilities = model.capabilities;
  const { parts: written, speed, ignored } = spokenParts(request.text);
  const instructions = request.instructions?.trim() || undefined;
  const jobOf = (text: string, writtenLength: number) => ({
    text,
    voice: request.builtInVoice ?? capabilities.defaultVoice,
    language: request.language ?? "Auto",
    seed: request.seed,
    // From the text as sent: its allowance of a second per character already covers written forms read out in
    // full, and normalized text cannot then make a file longer than the same input did before.
    maxNewTokens: Math.min(request.maxNewTokens ?? Infinity, maxFramesForInput(writtenLength, capabilities.framesPerSecond)),
    instructions: capabilities.supportsInstructions ? instructions : undefined,
    extraParams: request.extraParams,
  });
  const readParts = written.map((part) => {
    const markdownRead = request.markdown ? readMarkdown(part.text, request.markdown).trim() : part.text;
    const lexiconRead = request.lexicon ? request.lexicon.apply(markdownRead) : markdownRead;
    // Nothing left to say once read (only emoji, only marks): the text as sent goes on, so the model's own
    // check says what it cannot read rather than speaking nothing.
    const read = SPEAKABLE.test(lexiconRead) ? lexiconRead : part.text;
    return { read, written: part.text, pauseAfterMs: part.pauseAfterMs };
  });
  if (readParts.length === 1 && readParts[0]!.pauseAfterMs === 0 && speed === undefined) {
    const readable = readableText(model, spokenText(readParts[0]!.read, request.normalization, capabilities));
    return { job: jobOf(readable.text, request.text.length), textDropped: readable.dropped, ignoredSsml: ignored };
  }
  let dropped = false;
  const parts: UtterancePart[] = readParts.map((part) => {
    if (!SPEAKABLE.test(part.read)) return { job: undefined, pauseAfterMs: part.pauseAfterMs };
    const readable = readableText(model, spokenText(part.read, request.normalization, capabilities));
    dropped ||= readable.dropped;
    return { job: jobOf(readable.text, part.written.length), pauseAfterMs: part.pauseAfterMs };
  });
  const spoken = parts.flatMap((part) => (part.job ? [part.job.text] : []));
  if (spoken.length === 0) throw badRequest("input has nothing to say outside its SSML tags", "input");
  return { job: jobOf(spoken.join(" "), request.text.length), textDropped: dropped, parts, ssmlSpeed: speed, ignoredSsml: ignored };
}

/** The text cut at its breaks: a `<speak>` document read as SSML, plain text at its break tags. SSML errors are 400s. */
function spokenParts(text: string): { parts: SpokenPart[]; speed?: number; ignored: string[] } {
  try {
    if (isSsmlDocument(text)) return readSsml(text);
    return { parts: splitAtBreaks(text), ignored: [] };
  } catch (error) {
    if (error instanceof SsmlError) throw badRequest(error.message, "input");
    throw error;
  }
}

/**
 * The text as the served model reads it (SpeechModel.readableText). When the model could read none of the
 * letters and digits sent, it is a 400 now rather than silence, or a failure once the audio has begun.
 */
function readableText(model: Pick<SpeechModel, "capabilities" | "readableText">, text: string): { text: string; dropped: boolean } {
  const readable = model.readableText?.(text) ?? { text, dropped: false };
  if (readable.dropped && !SPEAKABLE.test(readable.text)) {
    throw badRequest(`input has nothing ${model.capabilities.modelId} can read (${model.capabilities.description}): its characters are of a script the model does not speak`, "input");
  }
  return readable;
}
