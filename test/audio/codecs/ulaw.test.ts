/** The ulaw codec: G.711 μ-law, one byte per sample at 8 kHz only, a stream's chunks the file's bytes cut anywhere. */
import { describe, expect, test } from "bun:test";
import { ulawCodec } from "../../../src/audio/codecs/ulaw.ts";
import { NO_PAUSE } from "../../../src/audio/pause.ts";
import { decodeFile, sine, streamed } from "../../support/encoded-file.ts";
import { dominantFrequencyHz } from "../../support/spectrum.ts";

const TONE_HZ = 440;
/** Parabolic peak interpolation on 1 s is far finer than this; G.711 does not move a pure tone. */
const FREQUENCY_TOLERANCE_HZ = 1;

describe("ulaw", () => {
  test("is audio/basic at 8 kHz only, its stream converted on the calling thread", () => {
    expect({ name: ulawCodec.name, contentType: ulawCodec.contentType, fixedRateHz: ulawCodec.fixedRateHz, streamEncodesOn: ulawCodec.streamEncodesOn }).toEqual({
      name: "ulaw",
      contentType: "audio/basic",
      fixedRateHz: 8000,
      streamEncodesOn: "calling-thread",
    });
  });

  test("a file is one G.711 byte per sample that ffmpeg decodes to the same tone", async () => {
    const input = sine(TONE_HZ, 8000, 8000);
    const encoded = await ulawCodec.encodeFile(input, 8000, {}, NO_PAUSE);
    expect(encoded.length).toBe(input.length);
    const decoded = decodeFile(encoded, "ulaw", 8000);
    expect(decoded.sampleRateHz).toBe(8000);
    expect(decoded.samples.length).toBe(input.length);
    expect(Math.abs(dominantFrequencyHz(decoded.samples, 8000) - TONE_HZ)).toBeLessThan(FREQUENCY_TOLERANCE_HZ);
  });

  test("a stream's joined chunks are the file", async () => {
    const input = sine(TONE_HZ, 8000, 8000);
    expect(await streamed(await ulawCodec.createStream(8000, {}), input, 640)).toEqual(await ulawCodec.encodeFile(input, 8000, {}, NO_PAUSE));
  });
});
