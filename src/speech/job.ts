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
}

/** Something to say: a letter or a digit. */
const SPEAKABLE = /[\p{L}\p{N}]/u;

/** The job for `request` on `model`; a 400 when the model could read none of the text's letters and digits. */
export function utteranceJob(model: Pick<SpeechModel, "capabilities" | "readableText">, request: UtteranceRequest): UtteranceJob {
  const capabilities = model.capabilities;
  const markdownRead = request.markdown ? readMarkdown(request.text, request.markdown).trim() : request.text;
  const read = request.lexicon ? request.lexicon.apply(markdownRead) : markdownRead;
  const readable = readableText(model, spokenText(read, request.normalization, capabilities));
  const instructions = request.instructions?.trim() || undefined;
  return {
    job: {
      text: readable.text,
      voice: request.builtInVoice ?? capabilities.defaultVoice,
      language: request.language ?? "Auto",
      seed: request.seed,
      // From the text as sent: its allowance of a second per character already covers written forms read out in
      // full, and normalized text cannot then make a file longer than the same input did before.
      maxNewTokens: Math.min(request.maxNewTokens ?? Infinity, maxFramesForInput(request.text.length, capabilities.framesPerSecond)),
      instructions: capabilities.supportsInstructions ? instructions : undefined,
      extraParams: request.extraParams,
    },
    textDropped: readable.dropped,
  };
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
