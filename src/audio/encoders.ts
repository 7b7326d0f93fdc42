/**
 * The speech API's response formats: one entry point that turns mono float samples into the bytes of a
 * complete file. The work runs on the encoder workers (encoder-pool.ts), never on the caller's thread: a long
 * file takes seconds to encode, which on the main thread would hold every other request. What each format
 * holds and which library makes it: its codec's module (formats.ts lists them).
 */
import { encoderPool } from "./encoder-pool.ts";
import type { EncodingOptions, ResponseFormat } from "./formats.ts";

export { CONTENT_TYPES, type EncodingOptions, type ResponseFormat } from "./formats.ts";

/** Encodes mono samples in [-1, 1] (clipped beyond) as a complete file in `format`. The caller keeps `samples`. */
export async function encodeAudio(samples: Float32Array, sampleRateHz: number, format: ResponseFormat, options: EncodingOptions = {}): Promise<Uint8Array> {
  checkSampleRate(sampleRateHz);
  return (await encoderPool().renderFile(samples.slice(), sampleRateHz, format, options, 1)).bytes;
}

/**
 * The file of `samples` played `speed` times faster (audio/speed.ts), and its length in samples after the speed
 * change. `samples`' buffer is handed to the worker, not copied: the caller gives the array up.
 */
export async function renderAudioFile(samples: Float32Array, sampleRateHz: number, format: ResponseFormat, options: EncodingOptions = {}, speed = 1): Promise<{ bytes: Uint8Array; sampleCount: number }> {
  checkSampleRate(sampleRateHz);
  return encoderPool().renderFile(samples, sampleRateHz, format, options, speed);
}

function checkSampleRate(sampleRateHz: number): void {
  if (!Number.isInteger(sampleRateHz) || sampleRateHz <= 0) throw new RangeError(`sampleRateHz must be a positive integer, got ${sampleRateHz}`);
}
