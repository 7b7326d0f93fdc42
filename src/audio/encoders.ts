/**
 * The speech API's response formats: one entry point that turns mono float samples into the bytes of
 * a complete file. Each codec lives in its own module, whose header says which library it uses and
 * why, how long its decoded output is, and how it stays safe under concurrent calls. Codec libraries
 * are imported on first use, so a server that never returns AAC never loads ffmpeg's wasm.
 */
import { encodeAdtsAac } from "./aac.ts";
import { encodeFlac } from "./flac.ts";
import { encodeMp3 } from "./mp3.ts";
import { encodeOggOpus } from "./opus.ts";
import { encodeWav, pcm16Bytes } from "./wav.ts";
import { encodeG711 } from "./g711.ts";

export type ResponseFormat = "wav" | "pcm" | "mp3" | "flac" | "opus" | "aac" | "ulaw" | "alaw";

/** A lossy codec's bitrate, for callers that name one (ElevenLabs' `mp3_44100_128`); unset, each codec's own default. */
export interface EncodingOptions {
  bitrateKbps?: number;
}

export const CONTENT_TYPES: Record<ResponseFormat, string> = {
  wav: "audio/wav",
  pcm: "audio/pcm",
  mp3: "audio/mpeg",
  flac: "audio/flac",
  opus: "audio/ogg",
  aac: "audio/aac",
  // RFC 2045 / RFC 3551 names: raw G.711 at 8 kHz.
  ulaw: "audio/basic",
  alaw: "audio/x-alaw-basic",
};

/** Encodes mono samples in [-1, 1] (clipped beyond) as a complete file in `format`. */
export async function encodeAudio(samples: Float32Array, sampleRateHz: number, format: ResponseFormat, options: EncodingOptions = {}): Promise<Uint8Array> {
  if (!Number.isInteger(sampleRateHz) || sampleRateHz <= 0) {
    throw new RangeError(`sampleRateHz must be a positive integer, got ${sampleRateHz}`);
  }
  switch (format) {
    case "wav":
      return encodeWav(samples, sampleRateHz);
    case "pcm":
      return pcm16Bytes(samples);
    case "mp3":
      return encodeMp3(samples, sampleRateHz, options.bitrateKbps);
    case "flac":
      return encodeFlac(samples, sampleRateHz);
    case "opus":
      return encodeOggOpus(samples, sampleRateHz, options.bitrateKbps);
    case "aac":
      return encodeAdtsAac(samples, sampleRateHz);
    case "ulaw":
    case "alaw":
      return encodeG711(samples, format);
  }
}
