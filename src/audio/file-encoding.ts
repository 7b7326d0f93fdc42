/**
 * A whole file in a response format, on the calling thread: the encoder worker (encoder-worker.ts) runs this;
 * the rest of the server calls encoders.ts, which sends the work there. Each format's codec (formats.ts) says
 * which library makes it and why, how long its decoded output is, and how it stays safe under concurrent
 * calls. Codec libraries are imported on first use, so a server that never returns AAC never loads ffmpeg's
 * wasm. Long inputs are worked through in bounded slices (tens of ms each), with `pause` between them, so a
 * long file shares its thread with the streams beside it.
 */
import { changeSpeed } from "./speed.ts";
import type { EncodingOptions } from "./codec.ts";
import { NO_PAUSE, type Pause } from "./pause.ts";
import { codecOf, type ResponseFormat } from "./formats.ts";

/** Encodes mono samples in [-1, 1] (clipped beyond) as a complete file in `format`. */
export async function encodeFileOnThisThread(samples: Float32Array, sampleRateHz: number, format: ResponseFormat, options: EncodingOptions = {}, pause: Pause = NO_PAUSE): Promise<Uint8Array> {
  if (!Number.isInteger(sampleRateHz) || sampleRateHz <= 0) {
    throw new RangeError(`sampleRateHz must be a positive integer, got ${sampleRateHz}`);
  }
  return codecOf(format).encodeFile(samples, sampleRateHz, options, pause);
}

/** The file of `samples` played `speed` times faster, and its length in samples. */
export async function renderFileOnThisThread(samples: Float32Array, sampleRateHz: number, format: ResponseFormat, options: EncodingOptions, speed: number, pause: Pause = NO_PAUSE): Promise<{ bytes: Uint8Array; sampleCount: number }> {
  const audio = speed === 1 ? samples : await changeSpeed(samples, sampleRateHz, speed, pause);
  return { bytes: await encodeFileOnThisThread(audio, sampleRateHz, format, options, pause), sampleCount: audio.length };
}
