/** The headers of a speech response: its content type per format, its usage, and the fields the model ignored. */
import { CONTENT_TYPES, type ResponseFormat } from "../audio/encoders.ts";
import type { PreparedSpeech, SpeechEnd, SpeechUsage } from "../speech/service.ts";

/** What usage each header carries; each is sent as X-<name> and, for vLLM-Omni's clients, as X-VLLM-OMNI-<NAME>. */
const USAGE_HEADERS: Record<string, (usage: SpeechUsage) => number> = {
  "Input-Tokens": (usage) => usage.input_tokens,
  "Output-Tokens": (usage) => usage.output_tokens,
  "Total-Tokens": (usage) => usage.total_tokens,
  "Input-Text-Tokens": (usage) => usage.input_token_details.text_tokens,
  "Input-Audio-Tokens": (usage) => usage.input_token_details.audio_tokens,
};

function usageHeaderNames(name: string): string[] {
  return [`X-${name}`, `X-VLLM-OMNI-${name.toUpperCase()}`];
}

/** The headers a speech response may carry beyond the standard ones: what CORS lets a browser read. */
export const SPEECH_RESPONSE_HEADERS: readonly string[] = [...Object.keys(USAGE_HEADERS).flatMap(usageHeaderNames), "X-Ignored-Fields", "X-Finish-Reason"];

/** The media type of audio in `format`, as Content-Type and a batch result's media_type say it. */
export function mediaTypeOf(format: ResponseFormat): string {
  return CONTENT_TYPES[format];
}

/** Names the fields the model ignored, so a client learns that they had no effect; none, no header. */
export function ignoredFieldsHeader(ignoredFields: readonly string[]): Record<string, string> {
  return ignoredFields.length > 0 ? { "X-Ignored-Fields": ignoredFields.join(",") } : {};
}

export function usageHeaders(usage: SpeechUsage): Record<string, string> {
  return Object.fromEntries(Object.entries(USAGE_HEADERS).flatMap(([name, count]) => usageHeaderNames(name).map((header) => [header, String(count(usage))])));
}

/** A whole file's headers: all is known once it is made, how its generation ended included. */
export function fileHeaders(prepared: PreparedSpeech, byteLength: number, end: SpeechEnd): Record<string, string> {
  return {
    "Content-Type": mediaTypeOf(prepared.responseFormat),
    "Content-Length": String(byteLength),
    "X-Finish-Reason": end.finishReason,
    ...usageHeaders(end.usage),
    ...ignoredFieldsHeader(prepared.ignoredFields),
  };
}

/** A raw audio stream's headers: usage and the finish reason are not known yet when they leave. */
export function audioStreamHeaders(prepared: PreparedSpeech): Record<string, string> {
  return { "Content-Type": mediaTypeOf(prepared.responseFormat), "Cache-Control": "no-store", ...ignoredFieldsHeader(prepared.ignoredFields) };
}
