/**
 * Every response format as a stream (what each gives, and when: stream-encoding.ts). The codecs' encoders (mp3,
 * opus, flac, aac) run on an encoder worker (encoder-pool.ts): each push sends the chunk there and resolves
 * with the bytes it gave. The sample formats (pcm, wav, G.711) stay on the calling thread: a chunk costs
 * microseconds to convert, less than the trip to a worker, and there it never waits behind another stream's
 * aac run or a long file's slice.
 */
import { encoderPool } from "./encoder-pool.ts";
import type { EncodingOptions, ResponseFormat } from "./response-format.ts";
import { createStreamEncoderOnThisThread, type StreamEncoder } from "./stream-encoding.ts";

export type { StreamEncoder } from "./stream-encoding.ts";
export { adtsFrames } from "./aac.ts";

const SAMPLE_FORMATS: ReadonlySet<ResponseFormat> = new Set(["pcm", "wav", "ulaw", "alaw"]);

/** An encoder for a stream of mono samples in [-1, 1] at `sampleRateHz` in `format`. */
export async function createStreamEncoder(format: ResponseFormat, sampleRateHz: number, options: EncodingOptions = {}): Promise<StreamEncoder> {
  if (SAMPLE_FORMATS.has(format)) return createStreamEncoderOnThisThread(format, sampleRateHz, options);
  return encoderPool().openStream(format, sampleRateHz, options);
}
