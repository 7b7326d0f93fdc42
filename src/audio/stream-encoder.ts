/**
 * Every response format as a stream: bytes for each chunk of audio as it is made, each a valid continuation of
 * the ones before, so that the joined bytes are one playable file and a player can start on the first chunk.
 * OpenAI streams all six of its formats; LiveKit's plugin asks for streamed mp3 by default. What each format
 * gives, and when, is in its codec's module (codecs/).
 *
 * A codec's stream encodes where its `streamEncodesOn` says: the sample formats (pcm, wav, G.711) on the
 * calling thread, the others on an encoder worker (encoder-pool.ts), where each push sends the chunk and
 * resolves with the bytes it gave.
 */
import { encoderPool } from "./encoder-pool.ts";
import type { EncodingOptions, StreamEncoder } from "./codec.ts";
import { codecOf, type ResponseFormat } from "./formats.ts";

export type { StreamEncoder } from "./codec.ts";

/** An encoder for a stream of mono samples in [-1, 1] at `sampleRateHz` in `format`. */
export async function createStreamEncoder(format: ResponseFormat, sampleRateHz: number, options: EncodingOptions = {}): Promise<StreamEncoder> {
  const codec = codecOf(format);
  if (codec.streamEncodesOn === "calling-thread") return codec.createStream(sampleRateHz, options);
  return encoderPool().openStream(format, sampleRateHz, options);
}
