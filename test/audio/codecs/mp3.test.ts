/**
 * The mp3 codec: LAME's frames led by the Info tag we write, at the bitrate asked and a rate of MP3's table
 * (resampled up to one where needed); a stream is the file's frames without the tag.
 */
import { describe, expect, test } from "bun:test";
import { mp3Codec } from "../../../src/audio/codecs/mp3.ts";
import { NO_PAUSE } from "../../../src/audio/pause.ts";
import { decodeFile, sine, streamed } from "../../support/encoded-file.ts";
import { dominantFrequencyHz } from "../../support/spectrum.ts";

const TONE_HZ = 440;
/** Parabolic peak interpolation on 1.5 s is far finer than this; lossy codecs do not move a pure tone. */
const FREQUENCY_TOLERANCE_HZ = 1;

describe("mp3", () => {
  test("is audio/mpeg at any rate, its stream encoded on the encoder worker", () => {
    expect({ name: mp3Codec.name, contentType: mp3Codec.contentType, fixedRateHz: mp3Codec.fixedRateHz, streamEncodesOn: mp3Codec.streamEncodesOn }).toEqual({
      name: "mp3",
      contentType: "audio/mpeg",
      fixedRateHz: undefined,
      streamEncodesOn: "encoder-worker",
    });
  });

  test.each([
    { sampleRateHz: 22050, bitrateKbps: 32, codedRateHz: 22050 },
    { sampleRateHz: 44100, bitrateKbps: 32, codedRateHz: 22050 },
    { sampleRateHz: 44100, bitrateKbps: 192, codedRateHz: 44100 },
  ])("mp3 at $bitrateKbps kbps from $sampleRateHz Hz is coded at $codedRateHz Hz at that bitrate, its Info tag (in a larger frame where needed) trimming exactly", async ({ sampleRateHz, bitrateKbps, codedRateHz }) => {
    const seconds = 3;
    const input = sine(TONE_HZ, sampleRateHz, seconds * sampleRateHz);
    const encoded = await mp3Codec.encodeFile(input, sampleRateHz, { bitrateKbps }, NO_PAUSE);
    const decoded = decodeFile(encoded, "mp3", sampleRateHz);
    expect(decoded.encoderTag).toBe("LAME3.98r");
    expect(decoded.sampleRateHz).toBe(codedRateHz);
    expect(decoded.samples.length).toBe(seconds * codedRateHz);
    const kbps = (encoded.length * 8) / seconds / 1000;
    expect(Math.abs(kbps - bitrateKbps) / bitrateKbps).toBeLessThan(0.05);
  });

  test("a rate outside MP3's table is resampled to the next one up", async () => {
    const input = sine(TONE_HZ, 20000, 30000);
    const decoded = decodeFile(await mp3Codec.encodeFile(input, 20000, {}, NO_PAUSE), "mp3", 20000);
    expect(decoded.sampleRateHz).toBe(22050);
    expect(decoded.samples.length).toBe(Math.round((input.length * 22050) / 20000));
    expect(Math.abs(dominantFrequencyHz(decoded.samples, decoded.sampleRateHz) - TONE_HZ)).toBeLessThan(FREQUENCY_TOLERANCE_HZ);
  });

  test("a stream's joined frames are the file's without its leading Info tag", async () => {
    const input = sine(TONE_HZ, 24000, 36000);
    const file = await mp3Codec.encodeFile(input, 24000, {}, NO_PAUSE);
    const stream = await streamed(await mp3Codec.createStream(24000, {}), input, 1920);
    expect(stream.length).toBeGreaterThan(0);
    expect(file.length).toBeGreaterThan(stream.length);
    expect(file.subarray(file.length - stream.length)).toEqual(stream);
  });
});
