/**
 * Every response format as a stream (what each gives, and when: stream-encoding.ts), its encoder running on an
 * encoder worker (encoder-pool.ts): each push sends the chunk there and resolves with the bytes it gave.
 */
import { encoderPool } from "./encoder-pool.ts";
import type { EncodingOptions, ResponseFormat } from "./response-format.ts";
import type { StreamEncoder } from "./stream-encoding.ts";

export type { StreamEncoder } from "./stream-encoding.ts";
export { adtsFrames } from "./aac.ts";

/** An encoder for a stream of mono samples in [-1, 1] at `sampleRateHz` in `format`. */
export async function createStreamEncoder(format: ResponseFormat, sampleRateHz: number, options: EncodingOptions = {}): Promise<StreamEncoder> {
  return encoderPool().openStream(format, sampleRateHz, options);
}
