/**
 * Every response format, decoded by ffmpeg as the independent reference: sample rate, length and the
 * frequency of a 440 Hz tone must survive encoding.
 *
 * Length tolerance per codec, in samples at the decoded rate (n = input samples):
 *   wav, pcm, flac  exact, and bit-exact against floatToInt16 (FLAC's STREAMINFO MD5 must match too).
 *   mp3             exact. The LAME Info tag declares LAME's 576-sample encoder delay and the end
 *                   padding (576 samples to 576 + one 576/1152-sample frame); ffprobe reports the delay
 *                   (plus the 529-sample decoder delay) as the stream's start_time, and ffmpeg trims both.
 *   opus            exact at 48 kHz: round(n × 48000 / rate). One 20 ms frame is the codec's own
 *                   granularity, but pre-skip and the end-trimming granule position cut it exactly.
 *   aac             n + 1024 (the encoder's priming frame, which ADTS cannot declare) + under one
 *                   1024-sample frame of end padding.
 *
 * This is the entry point, through the encoder workers; what is particular to one format (G.711 at 8 kHz,
 * MP3's bitrates and rate table, FLAC's STREAMINFO, Opus's bitrate, AAC's run limit, each format's stream) is
 * tested beside its codec, in test/audio/codecs/.
 */
import { spawnSync } from "node:child_process";
import { beforeAll, describe, expect, test } from "bun:test";
import { MPEGDecoder } from "mpg123-decoder";
import { encodeAudio, type ResponseFormat } from "../../src/audio/encoders.ts";
import { floatToInt16 } from "../../src/audio/wav.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";
import { decodeFile, expectBitExact, sine } from "../support/encoded-file.ts";
import { dominantFrequencyHz } from "../support/spectrum.ts";

const TONE_HZ = 440;
const DURATION_SECONDS = 1.5;
const OGG_OPUS_RATE_HZ = 48000;
/** LAME's encoder delay plus the 528 + 1 samples of decoder delay that LAME-aware decoders add to it. */
const LAME_START_SKIP_SAMPLES = 576 + 529;
const AAC_FRAME_SAMPLES = 1024;
/** Parabolic peak interpolation on 1.5 s is far finer than this; lossy codecs do not move a pure tone. */
const FREQUENCY_TOLERANCE_HZ = 1;

const FORMATS: ResponseFormat[] = ["wav", "pcm", "mp3", "flac", "opus", "aac"];
const CASES: { format: ResponseFormat; sampleRateHz: number }[] = [
  ...FORMATS.flatMap((format) => [24000, 22050].map((sampleRateHz) => ({ format, sampleRateHz }))),
  { format: "opus", sampleRateHz: 16000 },
];

function expectLength(format: ResponseFormat, sampleRateHz: number, inputSamples: number, decodedSamples: number): void {
  switch (format) {
    case "wav":
    case "pcm":
    case "flac":
    case "mp3":
      expect(decodedSamples).toBe(inputSamples);
      return;
    case "opus":
      expect(decodedSamples).toBe(Math.round((inputSamples * OGG_OPUS_RATE_HZ) / sampleRateHz));
      return;
    case "aac": {
      const padding = decodedSamples - inputSamples - AAC_FRAME_SAMPLES;
      expect(padding).toBeGreaterThanOrEqual(0);
      expect(padding).toBeLessThan(AAC_FRAME_SAMPLES);
      return;
    }
  }
}

beforeAll(() => {
  for (const tool of ["ffmpeg", "ffprobe"]) {
    const probe = spawnSync(tool, ["-version"]);
    if (probe.error || probe.status !== 0) throw new Error(`${tool} not found; these tests decode with it: apt-get install ffmpeg`);
  }
});

describe("encodeAudio", () => {
  test.each(CASES)("$format at $sampleRateHz Hz decodes with ffmpeg to the same tone and length", async ({ format, sampleRateHz }) => {
    const input = sine(TONE_HZ, sampleRateHz, Math.round(DURATION_SECONDS * sampleRateHz));
    const encoded = await encodeAudio(input, sampleRateHz, format);
    const decoded = decodeFile(encoded, format, sampleRateHz);

    expect(decoded.channels).toBe(1);
    expect(decoded.sampleRateHz).toBe(format === "opus" ? OGG_OPUS_RATE_HZ : sampleRateHz);
    expectLength(format, sampleRateHz, input.length, decoded.samples.length);
    expect(Math.abs(dominantFrequencyHz(decoded.samples, decoded.sampleRateHz) - TONE_HZ)).toBeLessThan(FREQUENCY_TOLERANCE_HZ);

    if (format === "pcm") expect(encoded.length).toBe(2 * input.length);
    if (format === "wav" || format === "pcm" || format === "flac") expectBitExact(decoded.samples, floatToInt16(input));
    if (format === "mp3") {
      // ffmpeg names the encoder only when the tag's CRC checks out.
      expect(decoded.encoderTag).toBe("LAME3.98r");
      expect(decoded.startTimeSeconds).toBeCloseTo(LAME_START_SKIP_SAMPLES / sampleRateHz, 5);
    }
  });

  test("concurrent encodes give the same result as one at a time", async () => {
    const sampleRateHz = 22050;
    const jobs = (["mp3", "flac", "opus", "aac"] as const).flatMap((format) =>
      [330, 550, 770].map((toneHz) => ({ format, input: sine(toneHz, sampleRateHz, sampleRateHz / 2) })),
    );
    const concurrent = await Promise.all(jobs.map(({ format, input }) => encodeAudio(input, sampleRateHz, format)));
    for (const [i, { format, input }] of jobs.entries()) {
      const alone = await encodeAudio(input, sampleRateHz, format);
      // The Ogg muxer gives every stream a random serial number, so Opus is compared after decoding.
      if (format === "opus") expect(decodeWithFfmpeg(concurrent[i]!).samples).toEqual(decodeWithFfmpeg(alone).samples);
      else expect(concurrent[i]).toEqual(alone);
    }
  });

  test("empty input gives a file that decodes to nothing", async () => {
    const empty = new Float32Array(0);
    for (const format of ["wav", "pcm", "flac", "opus"] as const) {
      expect(decodeFile(await encodeAudio(empty, 24000, format), format, 24000).samples.length).toBe(0);
    }
    // ffmpeg 5.1 mis-trims an MP3 this short (529 samples of silence are left), so mpg123 decodes it.
    const mpg123 = new MPEGDecoder();
    await mpg123.ready;
    expect(mpg123.decode(await encodeAudio(empty, 24000, "mp3")).samplesDecoded).toBe(0);
    mpg123.free();
    // ADTS has no stream header, so no frames means no bytes.
    expect((await encodeAudio(empty, 24000, "aac")).length).toBe(0);
  });

  test("rejects a sample rate that is not a positive integer", async () => {
    for (const sampleRateHz of [0, -24000, 22050.5, Number.NaN]) {
      await expect(encodeAudio(new Float32Array(10), sampleRateHz, "mp3")).rejects.toThrow(RangeError);
    }
  });
});
