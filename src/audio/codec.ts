/**
 * What a response format's codec is (one module each in codecs/, listed in formats.ts), and the parts that
 * several of them share: the slicing of the formats that are one sample → bytes, and the resampling in front
 * of an encoder that codes only some rates.
 */
import { concatBytes } from "../lib/concat.ts";
import type { Pause } from "./pause.ts";
import { createStreamingResampler, type StreamingResampler } from "./resampler.ts";

/** A lossy codec's bitrate, for callers that name one (ElevenLabs' `mp3_44100_128`); unset, each codec's own default. */
export interface EncodingOptions {
  bitrateKbps?: number;
}

export interface StreamEncoder {
  /** The bytes the format can give for the audio so far (possibly none yet): whole frames or pages. */
  push(samples: Float32Array): Promise<Uint8Array>;
  /** The rest, and the end of the stream. */
  end(): Promise<Uint8Array>;
  /** Frees the encoder without finishing (the client left). Safe to call after `end`, and twice. */
  close(): void;
}

/** Everything the server knows of one response format. Samples are mono, in [-1, 1] (clipped beyond). */
export interface Codec<Name extends string = string> {
  /** The `response_format` that asks for it. */
  readonly name: Name;
  readonly contentType: string;
  /** The one rate the format is defined at, which the speech service resamples to; unset, any rate is coded. */
  readonly fixedRateHz?: number;
  /**
   * Where a stream's chunks are encoded: the sample formats' cost microseconds, less than the trip to a worker,
   * and on the calling thread they never wait behind another stream's encode. A whole file is encoded on the
   * encoder worker whatever its format, since its length is unbounded.
   */
  readonly streamEncodesOn: "calling-thread" | "encoder-worker";
  /** A complete file, `pause` between bounded slices of a long input. */
  encodeFile(samples: Float32Array, sampleRateHz: number, options: EncodingOptions, pause: Pause): Promise<Uint8Array>;
  /** An encoder whose pieces, joined, are one playable file, each a valid continuation of the ones before. */
  createStream(sampleRateHz: number, options: EncodingOptions): Promise<StreamEncoder>;
}

/** Samples converted per slice by the formats that are one sample → bytes (wav, pcm, G.711). */
const SAMPLE_SLICE = 1 << 16;

/** The bytes of a format that codes each sample on its own, converted in slices with `pause` between them. */
export async function encodeSamplesInSlices(samples: Float32Array, encode: (slice: Float32Array) => Uint8Array, pause: Pause): Promise<Uint8Array[]> {
  const parts: Uint8Array[] = [];
  for (let start = 0; start < samples.length; start += SAMPLE_SLICE) {
    if (start > 0) await pause();
    parts.push(encode(samples.subarray(start, start + SAMPLE_SLICE)));
  }
  return parts;
}

const EMPTY = new Uint8Array(0);

/** The stream of a headerless format that codes each sample on its own: its chunks are a file's bytes cut anywhere. */
export function sampleByteStream(encode: (samples: Float32Array) => Uint8Array): StreamEncoder {
  return { push: async (samples) => encode(samples), end: async () => EMPTY, close: () => undefined };
}

/** The encoder at the first rate it accepts at or above `sampleRateHz`, fed through a streaming resampler if that differs. */
export async function withResampling(sampleRateHz: number, rates: readonly number[], make: (rateHz: number) => Promise<StreamEncoder>): Promise<StreamEncoder> {
  const rateHz = rates.find((rate) => rate >= sampleRateHz) ?? rates.at(-1)!;
  const inner = await make(rateHz);
  if (rateHz === sampleRateHz) return inner;
  const resampler: StreamingResampler = await createStreamingResampler(sampleRateHz, rateHz);
  return {
    push: (samples) => inner.push(resampler.push(samples)),
    end: async () => {
      const tail = await inner.push(resampler.flush());
      resampler.close();
      return concatBytes([tail, await inner.end()]);
    },
    close: () => {
      inner.close();
      try {
        resampler.close();
      } catch {
        // Already closed by end().
      }
    },
  };
}
