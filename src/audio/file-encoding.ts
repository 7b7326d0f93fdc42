/**
 * A whole file in a response format, on the calling thread: the encoder worker (encoder-worker.ts) runs this;
 * the rest of the server calls encoders.ts, which sends the work there. Each codec lives in its own module,
 * whose header says which library it uses and why, how long its decoded output is, and how it stays safe
 * under concurrent calls. Codec libraries are imported on first use, so a server that never returns AAC never
 * loads ffmpeg's wasm. Long inputs are worked through in bounded slices (tens of ms each), with `pause`
 * between them, so a long file shares its thread with the streams beside it.
 */
import { encodeAacFile } from "./aac.ts";
import { encodeFlac } from "./flac.ts";
import { encodeMp3 } from "./mp3.ts";
import { encodeOggOpus } from "./opus.ts";
import { pcm16Bytes, wavHeader } from "./wav.ts";
import { encodeG711 } from "./g711.ts";
import { changeSpeed } from "./speed.ts";
import { concatBytes } from "../lib/concat.ts";
import { NO_PAUSE, type EncodingOptions, type Pause, type ResponseFormat } from "./response-format.ts";

/** Samples converted per slice by the formats that are one sample → bytes (wav, pcm, G.711). */
const SAMPLE_SLICE = 1 << 16;

/** Encodes mono samples in [-1, 1] (clipped beyond) as a complete file in `format`. */
export async function encodeFileOnThisThread(samples: Float32Array, sampleRateHz: number, format: ResponseFormat, options: EncodingOptions = {}, pause: Pause = NO_PAUSE): Promise<Uint8Array> {
  if (!Number.isInteger(sampleRateHz) || sampleRateHz <= 0) {
    throw new RangeError(`sampleRateHz must be a positive integer, got ${sampleRateHz}`);
  }
  switch (format) {
    case "wav":
      return concatBytes([wavHeader(sampleRateHz, samples.length * 2), ...(await perSlice(samples, pcm16Bytes, pause))]);
    case "pcm":
      return concatBytes(await perSlice(samples, pcm16Bytes, pause));
    case "mp3":
      return encodeMp3(samples, sampleRateHz, options.bitrateKbps, pause);
    case "flac":
      return encodeFlac(samples, sampleRateHz, pause);
    case "opus":
      return encodeOggOpus(samples, sampleRateHz, options.bitrateKbps, pause);
    case "aac":
      return encodeAacFile(samples, sampleRateHz, pause);
    case "ulaw":
    case "alaw":
      return concatBytes(await perSlice(samples, (slice) => encodeG711(slice, format), pause));
  }
}

/** The file of `samples` played `speed` times faster, and its length in samples. */
export async function renderFileOnThisThread(samples: Float32Array, sampleRateHz: number, format: ResponseFormat, options: EncodingOptions, speed: number, pause: Pause = NO_PAUSE): Promise<{ bytes: Uint8Array; sampleCount: number }> {
  const audio = speed === 1 ? samples : await changeSpeed(samples, sampleRateHz, speed, pause);
  return { bytes: await encodeFileOnThisThread(audio, sampleRateHz, format, options, pause), sampleCount: audio.length };
}

async function perSlice(samples: Float32Array, encode: (slice: Float32Array) => Uint8Array, pause: Pause): Promise<Uint8Array[]> {
  const parts: Uint8Array[] = [];
  for (let start = 0; start < samples.length; start += SAMPLE_SLICE) {
    if (start > 0) await pause();
    parts.push(encode(samples.subarray(start, start + SAMPLE_SLICE)));
  }
  return parts;
}
