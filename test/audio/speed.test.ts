import { describe, expect, test } from "bun:test";
import { changeSpeed, MAX_SPEED, MIN_SPEED } from "../../src/audio/speed.ts";
import { dominantFrequencyHz, frequencyResolutionHz } from "../support/spectrum.ts";

const SAMPLE_RATE_HZ = 24000;
const DURATION_SECONDS = 2;

function sine(frequencyHz: number, amplitude = 0.8): Float32Array {
  const samples = new Float32Array(DURATION_SECONDS * SAMPLE_RATE_HZ);
  for (let i = 0; i < samples.length; i++) samples[i] = amplitude * Math.sin((2 * Math.PI * frequencyHz * i) / SAMPLE_RATE_HZ);
  return samples;
}

/** A speech-like voiced tone: 220 Hz with harmonics falling off as 1/k up to 6 kHz. The fundamental is the strongest. */
function harmonicTone(fundamentalHz: number): Float32Array {
  const samples = new Float32Array(DURATION_SECONDS * SAMPLE_RATE_HZ);
  for (let i = 0; i < samples.length; i++) {
    let value = 0;
    for (let harmonic = 1; harmonic * fundamentalHz < 6000; harmonic++) {
      value += Math.sin((2 * Math.PI * harmonic * fundamentalHz * i) / SAMPLE_RATE_HZ) / harmonic;
    }
    samples[i] = 0.3 * value;
  }
  return samples;
}

function maxStep(samples: Float32Array): number {
  let max = 0;
  for (let i = 1; i < samples.length; i++) max = Math.max(max, Math.abs(samples[i]! - samples[i - 1]!));
  return max;
}

function peakOf(samples: Float32Array): number {
  let peak = 0;
  for (const sample of samples) peak = Math.max(peak, Math.abs(sample));
  return peak;
}

describe("changeSpeed", () => {
  const cases = [
    { name: "1 kHz sine", frequencyHz: 1000, input: sine(1000) },
    { name: "220 Hz harmonic-rich tone", frequencyHz: 220, input: harmonicTone(220) },
  ];
  for (const { name, frequencyHz, input } of cases) {
    for (const speed of [2, 0.5]) {
      test(`speed ${speed} scales the duration by 1/${speed} and keeps the pitch of a ${name}`, async () => {
        const output = await changeSpeed(input, SAMPLE_RATE_HZ, speed);
        const expectedLength = input.length / speed;
        expect(Math.abs(output.length - expectedLength) / expectedLength).toBeLessThanOrEqual(0.02);
        const resolutionHz = frequencyResolutionHz(output.length, SAMPLE_RATE_HZ);
        expect(Math.abs(dominantFrequencyHz(output, SAMPLE_RATE_HZ) - frequencyHz)).toBeLessThanOrEqual(resolutionHz);
      });
    }
  }

  test("the range ends 0.25 and 4 work", async () => {
    const input = harmonicTone(220);
    for (const speed of [MIN_SPEED, MAX_SPEED]) {
      const output = await changeSpeed(input, SAMPLE_RATE_HZ, speed);
      const expectedLength = input.length / speed;
      expect(Math.abs(output.length - expectedLength) / expectedLength).toBeLessThanOrEqual(0.02);
      // Sonic splices whole-sample pitch periods (109 for the true 109.09), which leaves the pitch
      // slightly off: measured +1.1 cents at 0.25 and −4.5 cents at 4. That is finer than the 8 s
      // output's DFT bin at 0.25, so the bound is in cents, near the threshold of hearing.
      const cents = 1200 * Math.log2(dominantFrequencyHz(output, SAMPLE_RATE_HZ) / 220);
      expect(Math.abs(cents)).toBeLessThanOrEqual(10);
    }
  });

  test("speed 1 returns the input unchanged", async () => {
    const input = sine(1000);
    expect(await changeSpeed(input, SAMPLE_RATE_HZ, 1)).toBe(input);
  });

  // Sonic keeps int16 internally. Without headroom handling, samples beyond ±1 wrap into full-scale clicks.
  test("samples beyond ±1 keep their level instead of wrapping around", async () => {
    const input = sine(220, 1.5);
    const output = await changeSpeed(input, SAMPLE_RATE_HZ, 2);
    expect(Math.abs(peakOf(output) - 1.5)).toBeLessThan(0.05);
    const maxSlope = (2 * Math.PI * 220 * 1.5) / SAMPLE_RATE_HZ;
    expect(maxStep(output)).toBeLessThan(maxSlope * 1.5);
  });

  test("quiet input keeps its level", async () => {
    const output = await changeSpeed(sine(1000, 1e-3), SAMPLE_RATE_HZ, 2);
    expect(Math.abs(peakOf(output) - 1e-3)).toBeLessThan(5e-5);
  });

  test("silence and empty input", async () => {
    expect((await changeSpeed(new Float32Array(0), SAMPLE_RATE_HZ, 2)).length).toBe(0);
    const silence = await changeSpeed(new Float32Array(SAMPLE_RATE_HZ), SAMPLE_RATE_HZ, 2);
    expect(silence.length).toBe(SAMPLE_RATE_HZ / 2);
    expect(peakOf(silence)).toBe(0);
  });

  test("rejects speeds outside 0.25..4 and bad sample rates", async () => {
    const input = sine(1000);
    for (const badSpeed of [0, 0.2, 4.5, -1, Number.NaN]) {
      await expect(changeSpeed(input, SAMPLE_RATE_HZ, badSpeed)).rejects.toThrow(RangeError);
    }
    await expect(changeSpeed(input, 0, 2)).rejects.toThrow(RangeError);
    await expect(changeSpeed(input, 22050.5, 2)).rejects.toThrow(RangeError);
  });
});
