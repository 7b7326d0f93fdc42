/** The speech API's response formats and what a caller may ask of their codecs. */
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

/**
 * Lets other work run between two bounded slices of a long encode: in the encoder worker, the other streams'
 * chunks and files' slices wait for it; elsewhere it returns at once.
 */
export type Pause = () => Promise<void>;

export const NO_PAUSE: Pause = async () => undefined;
