/**
 * The job the engine runs for one utterance, built one way for the server's core (service.ts) and for the page's
 * engine (browser/page/engine-worker.ts): the same text, voice and seed make the same job, and so the same
 * samples, on either.
 */
import type { TextNormalizationMode } from "../api/speech.ts";
import { badRequest } from "../api/errors.ts";
import { maxFramesForInput } from "../engine/request.ts";
import type { SpeechModel, SynthesisJob } from "../models/contract.ts";
import { spokenText, spokenTextInSlices } from "./text-normalization.ts";
import { MarkdownReader, mayBeMarkdown, readMarkdown, type MarkdownReadingOptions } from "../text/markdown.ts";
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
  return jobOfParts(model, request, spokenParts(request.text));
}

/** The job of a text already cut into parts, each part said as `said` has it (else read and normalized now). */
function jobOfParts(model: Pick<SpeechModel, "capabilities" | "readableText">, request: UtteranceRequest, reading: SpokenReading, said?: ReadonlyMap<string, string>): UtteranceJob {
  const capabilities = model.capabilities;
  const { parts: written, speed, ignored } = reading;
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
  const say = (text: string) => said?.get(text) ?? spokenText(readPart(request, text), request.normalization, capabilities);
  if (written.length === 1 && written[0]!.pauseAfterMs === 0 && speed === undefined) {
    const readable = readableText(model, say(written[0]!.text));
    return { job: jobOf(readable.text, request.text.length), textDropped: readable.dropped, ignoredSsml: ignored };
  }
  let dropped = false;
  const parts: UtterancePart[] = written.map((part) => {
    const spoken = say(part.text);
    if (!SPEAKABLE.test(spoken)) return { job: undefined, pauseAfterMs: part.pauseAfterMs };
    const readable = readableText(model, spoken);
    dropped ||= readable.dropped;
    return { job: jobOf(readable.text, part.text.length), pauseAfterMs: part.pauseAfterMs };
  });
  const spoken = parts.flatMap((part) => (part.job ? [part.job.text] : []));
  if (spoken.length === 0) throw badRequest("input has nothing to say outside its SSML tags", "input");
  return { job: jobOf(spoken.join(" "), request.text.length), textDropped: dropped, parts, ssmlSpeed: speed, ignoredSsml: ignored };
}

/** A part's text with its markdown read and the lexicon applied: what normalization gets. */
function readPart(request: UtteranceRequest, text: string, markdownRead = request.markdown ? readMarkdown(text, request.markdown).trim() : text): string {
  const lexiconRead = request.lexicon ? request.lexicon.apply(markdownRead) : markdownRead;
  // Nothing left to say once read (only emoji, only marks): the text as sent goes on, so the model's own
  // check says what it cannot read rather than speaking nothing.
  return SPEAKABLE.test(lexiconRead) ? lexiconRead : text;
}

/** Past this many characters a text is read in slices, the event loop turning between them. */
const SLICED_READING_CHARS = 4_000;
/** Markdown is pushed through its reader in pieces of this size. */
const MARKDOWN_SLICE_CHARS = 4_000;
const nextTurn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * utteranceJob for any length of text without holding the event loop: a long text's reading (markdown, the
 * lexicon, normalization: up to ~100 ms at 100,000 characters) is done in slices of a few milliseconds.
 */
export async function utteranceJobInSlices(model: Pick<SpeechModel, "capabilities" | "readableText">, request: UtteranceRequest): Promise<UtteranceJob> {
  if (request.text.length <= SLICED_READING_CHARS) return utteranceJob(model, request);
  const reading = spokenParts(request.text);
  const said = new Map<string, string>();
  for (const part of reading.parts) {
    if (said.has(part.text)) continue;
    let markdownRead = part.text;
    if (request.markdown && mayBeMarkdown(part.text)) {
      const reader = new MarkdownReader(request.markdown);
      markdownRead = "";
      for (let at = 0; at < part.text.length; at += MARKDOWN_SLICE_CHARS) {
        markdownRead += reader.push(part.text.slice(at, at + MARKDOWN_SLICE_CHARS));
        await nextTurn();
      }
      markdownRead = (markdownRead + reader.flush()).trim();
    }
    said.set(part.text, await spokenTextInSlices(readPart(request, part.text, markdownRead), request.normalization, model.capabilities, nextTurn));
  }
  return jobOfParts(model, request, reading, said);
}

/** The text cut at its breaks: a `<speak>` document read as SSML, plain text at its break tags. SSML errors are 400s. */
type SpokenReading = { parts: SpokenPart[]; speed?: number; ignored: string[] };

function spokenParts(text: string): SpokenReading {
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
