import { describe, expect, test } from "bun:test";
import { createStreamingResampler, resample, type StreamingResampler } from "../../src/audio/resampler.ts";
import { dominantFrequencyHz, frequencyResolutionHz } from "../support/spectrum.ts";
import { concatFloat32 } from "../../src/lib/concat.ts";

const SOURCE_RATE_HZ = 24000;
const TONE_HZ = 1000;
const TARGET_RATES_HZ = [8000, 16000, 44100, 48000];
/** Irregular on purpose: single samples, a prime, codec-sized frames, and one chunk larger than the wasm block. */
const CHUNK_PATTERN = [1, 7, 480, 1920, 3001, 9000];

/**
 * A unit-amplitude sine with 5 ms raised-cosine fades. A hard onset is not band-limited, so any
 * correct resampler rings there (Gibbs). The fades keep that ringing from being mistaken for a chunk seam.
 */
function fadedSine(frequencyHz: number, sampleRateHz: number, sampleCount: number): Float32Array {
  const fadeSamples = Math.round(0.005 * sampleRateHz);
  const samples = new Float32Array(sampleCount);
  for (let i = 0; i < sampleCount; i++) {
    const edgeDistance = Math.min(i, sampleCount - 1 - i);
    const fade = edgeDistance >= fadeSamples ? 1 : 0.5 - 0.5 * Math.cos((Math.PI * edgeDistance) / fadeSamples);
    samples[i] = fade * Math.sin((2 * Math.PI * frequencyHz * i) / sampleRateHz);
  }
  return samples;
}

function pushInChunks(resampler: StreamingResampler, samples: Float32Array, pattern: readonly number[]): Float32Array {
  const parts: Float32Array[] = [];
  for (let offset = 0, turn = 0; offset < samples.length; turn++) {
    const size = pattern[turn % pattern.length]!;
    parts.push(resampler.push(samples.subarray(offset, offset + size)));
    offset += size;
  }
  parts.push(resampler.flush());
  return concatFloat32(parts);
}


function maxAbsDifference(a: Float32Array, b: Float32Array): number {
  let max = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}

function maxStep(samples: Float32Array): number {
  let max = 0;
  for (let i = 1; i < samples.length; i++) max = Math.max(max, Math.abs(samples[i]! - samples[i - 1]!));
  return max;
}

function expectedLength(inputLength: number, fromHz: number, toHz: number): number {
  return Math.round((inputLength * toHz) / fromHz);
}

describe("resample", () => {
  // 1 s plus an odd remainder, so that the output length is not a whole number.
  const input = fadedSine(TONE_HZ, SOURCE_RATE_HZ, SOURCE_RATE_HZ + 37);

  for (const toHz of TARGET_RATES_HZ) {
    describe(`${SOURCE_RATE_HZ} → ${toHz} Hz`, () => {
      test("one-shot keeps the tone and the length", async () => {
        const output = await resample(input, SOURCE_RATE_HZ, toHz);
        expect(Math.abs(output.length - expectedLength(input.length, SOURCE_RATE_HZ, toHz))).toBeLessThanOrEqual(1);
        const resolutionHz = frequencyResolutionHz(output.length, toHz);
        expect(Math.abs(dominantFrequencyHz(output, toHz) - TONE_HZ)).toBeLessThanOrEqual(resolutionHz);
      });

      test("irregular chunks equal the one-shot output, with no step at the borders", async () => {
        const oneShot = await resample(input, SOURCE_RATE_HZ, toHz);
        const resampler = await createStreamingResampler(SOURCE_RATE_HZ, toHz);
        const streamed = pushInChunks(resampler, input, CHUNK_PATTERN);
        resampler.close();

        expect(Math.abs(streamed.length - expectedLength(input.length, SOURCE_RATE_HZ, toHz))).toBeLessThanOrEqual(1);
        expect(streamed.length).toBe(oneShot.length);
        expect(maxAbsDifference(streamed, oneShot)).toBeLessThan(1e-4);
        const resolutionHz = frequencyResolutionHz(streamed.length, toHz);
        expect(Math.abs(dominantFrequencyHz(streamed, toHz) - TONE_HZ)).toBeLessThanOrEqual(resolutionHz);
        // A unit sine at f moves at most 2π·f/fs per sample. A seam, a dropped sample or a duplicated sample would exceed that.
        const maxSlope = (2 * Math.PI * TONE_HZ) / toHz;
        expect(maxStep(streamed)).toBeLessThan(maxSlope * 1.01);
      });
    });
  }

  test("output length is round(n × to / from) for awkward lengths and ratios", async () => {
    for (const toHz of [8000, 11025, 22050, 44100, 48000]) {
      for (const inputLength of [1, 2, 7, 479, 12345]) {
        const output = await resample(fadedSine(TONE_HZ, SOURCE_RATE_HZ, inputLength), SOURCE_RATE_HZ, toHz);
        expect(Math.abs(output.length - expectedLength(inputLength, SOURCE_RATE_HZ, toHz))).toBeLessThanOrEqual(1);
      }
    }
  });

  test("the output is time-aligned with the input (no filter delay)", async () => {
    const toHz = 48000;
    const output = await resample(input, SOURCE_RATE_HZ, toHz);
    const fadeSamples = Math.round(0.005 * toHz);
    let maxError = 0;
    for (let i = fadeSamples; i < output.length - fadeSamples; i++) {
      maxError = Math.max(maxError, Math.abs(output[i]! - Math.sin((2 * Math.PI * TONE_HZ * i) / toHz)));
    }
    expect(maxError).toBeLessThan(1e-3);
  });

  test("equal rates pass the samples through as a copy", async () => {
    const output = await resample(input, SOURCE_RATE_HZ, SOURCE_RATE_HZ);
    expect(output).toEqual(input);
    expect(output).not.toBe(input);

    const resampler = await createStreamingResampler(SOURCE_RATE_HZ, SOURCE_RATE_HZ);
    expect(pushInChunks(resampler, input, CHUNK_PATTERN)).toEqual(input);
    resampler.close();
  });

  test("an empty stream yields nothing", async () => {
    expect((await resample(new Float32Array(0), SOURCE_RATE_HZ, 16000)).length).toBe(0);
  });

  test("rejects rates that are not positive integers", async () => {
    for (const badRateHz of [0, -16000, 22050.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(createStreamingResampler(SOURCE_RATE_HZ, badRateHz)).rejects.toThrow(RangeError);
      await expect(createStreamingResampler(badRateHz, SOURCE_RATE_HZ)).rejects.toThrow(RangeError);
    }
  });
});

describe("createStreamingResampler", () => {
  const input = fadedSine(TONE_HZ, SOURCE_RATE_HZ, 2 * SOURCE_RATE_HZ);

  test("flush() resets the instance so that it can take a new stream", async () => {
    const resampler = await createStreamingResampler(SOURCE_RATE_HZ, 16000);
    const first = pushInChunks(resampler, input, [1920]);
    const second = pushInChunks(resampler, input, [480]);
    resampler.close();
    expect(second).toEqual(first);
  });

  test("interleaved streams keep separate state", async () => {
    const toHzs = [16000, 44100, 16000];
    const resamplers = await Promise.all(toHzs.map((toHz) => createStreamingResampler(SOURCE_RATE_HZ, toHz)));
    const parts: Float32Array[][] = toHzs.map(() => []);
    for (let offset = 0; offset < input.length; offset += 960) {
      resamplers.forEach((resampler, index) => parts[index]!.push(resampler.push(input.subarray(offset, offset + 960))));
    }
    resamplers.forEach((resampler, index) => {
      parts[index]!.push(resampler.flush());
      resampler.close();
    });
    for (const [index, toHz] of toHzs.entries()) {
      expect(concatFloat32(parts[index]!)).toEqual(await resample(input, SOURCE_RATE_HZ, toHz));
    }
  });

  test("a closed resampler refuses more audio, and close() is idempotent", async () => {
    for (const toHz of [16000, SOURCE_RATE_HZ]) {
      const resampler = await createStreamingResampler(SOURCE_RATE_HZ, toHz);
      resampler.close();
      resampler.close();
      expect(() => resampler.push(input)).toThrow("closed");
      expect(() => resampler.flush()).toThrow("closed");
    }
  });
});
