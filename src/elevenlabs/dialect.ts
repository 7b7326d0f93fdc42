/**
 * ElevenLabs' dialect of a speech request, read into the core's spec: the one translation its REST routes and
 * its sockets share (output_format's format, rate and bitrate, voice_settings' speed, seed, language_code,
 * apply_text_normalization), and how it names what the model did not use.
 */
import type { TextNormalizationMode } from "../api/speech.ts";
import type { SpeechDelivery, SpeechSpec } from "../speech/service.ts";
import type { ResolvedVoice } from "../voices/catalog.ts";
import type { ElevenLabsOutputFormat } from "./schema.ts";
import type { Lexicon } from "../text/lexicon.ts";

/** What an ElevenLabs request asks of the speech, whether a REST body or a socket's URL and text. */
export interface ElevenLabsSpeech {
  text: string;
  format: ElevenLabsOutputFormat;
  speed?: number;
  seed?: number;
  languageCode?: string;
  normalization?: TextNormalizationMode;
  /** The rules of its pronunciation_dictionary_locators. */
  lexicon?: Lexicon;
}

export const FILE: SpeechDelivery = { mode: "file", streamed: false, admit: "now", whenFull: "reject" };
export const STREAM: SpeechDelivery = { mode: "audio_stream", streamed: true, admit: "now", whenFull: "reject" };
/** A socket's sentence is admitted when its audio is first read, and refused by an error message. */
export const SOCKET_SENTENCE: SpeechDelivery = { mode: "websocket", streamed: true, admit: "on-read", whenFull: "reject" };

/** The request in the core's terms; `routeIgnored` are the fields of the request no model here uses. */
export function elevenLabsSpec(request: ElevenLabsSpeech, voice: ResolvedVoice, routeIgnored: readonly string[] = []): SpeechSpec {
  const { format, languageCode } = request;
  return {
    text: request.text,
    voice,
    output: { format: format.responseFormat, rateHz: format.sampleRateHz, ...(format.bitrateKbps === undefined ? {} : { bitrateKbps: format.bitrateKbps }) },
    speed: request.speed,
    sampling: { seed: request.seed === undefined ? undefined : BigInt(request.seed), params: {} },
    normalization: request.normalization,
    ...(request.lexicon ? { lexicon: request.lexicon } : {}),
    language: languageCode,
    nameIgnored: (unused) => [
      ...(unused.text ? ["input"] : []),
      // No model here reads a language; "auto", letting the model decide, is what each of them does.
      ...(languageCode !== undefined && languageCode.trim().toLowerCase() !== "auto" ? ["language_code"] : []),
      ...routeIgnored,
    ],
  };
}
