/**
 * The speech API's response formats: one codec module each (codecs/), and this table of them, which the rest of
 * the server asks what a format is (its content type, its fixed rate, where its stream encodes, how it
 * encodes). A new format is its module in codecs/ and one entry here. The request schema's list
 * (api/speech.ts's RESPONSE_FORMATS, which may not import audio/) is checked against this table by
 * test/audio/formats.test.ts.
 */
import type { Codec } from "./codec.ts";
import { aacCodec } from "./codecs/aac.ts";
import { alawCodec } from "./codecs/alaw.ts";
import { flacCodec } from "./codecs/flac.ts";
import { mp3Codec } from "./codecs/mp3.ts";
import { opusCodec } from "./codecs/opus.ts";
import { pcmCodec } from "./codecs/pcm.ts";
import { ulawCodec } from "./codecs/ulaw.ts";
import { wavCodec } from "./codecs/wav.ts";

export type { EncodingOptions } from "./codec.ts";

/** In the order the API documents them: OpenAI's six, then raw G.711, what telephony carries. */
const CODECS = [wavCodec, pcmCodec, mp3Codec, flacCodec, opusCodec, aacCodec, ulawCodec, alawCodec] as const;

export type ResponseFormat = (typeof CODECS)[number]["name"];

export const RESPONSE_FORMATS: readonly ResponseFormat[] = CODECS.map((codec) => codec.name);

const CODEC_BY_FORMAT = new Map<ResponseFormat, Codec<ResponseFormat>>(CODECS.map((codec) => [codec.name, codec]));

export function codecOf(format: ResponseFormat): Codec<ResponseFormat> {
  const codec = CODEC_BY_FORMAT.get(format);
  // Only a caller that cast an unchecked string gets here: the type admits no other name.
  if (!codec) throw new RangeError(`no codec for response format '${format}'; known: ${RESPONSE_FORMATS.join(", ")}`);
  return codec;
}

export const CONTENT_TYPES = Object.fromEntries(CODECS.map((codec) => [codec.name, codec.contentType])) as Record<ResponseFormat, string>;
