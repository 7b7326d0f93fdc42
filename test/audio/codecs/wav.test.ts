/** The wav codec: a RIFF header and 16-bit samples, bit-exact; a stream leads with the "until EOF" header. */
import { describe, expect, test } from "bun:test";
import { wavCodec } from "../../../src/audio/codecs/wav.ts";
import { NO_PAUSE } from "../../../src/audio/pause.ts";
import { floatToInt16, pcm16Bytes, wavHeader } from "../../../src/audio/wav.ts";
import { decodeFile, expectBitExact, sine, streamed } from "../../support/encoded-file.ts";

describe("wav", () => {
  test("is audio/wav at any rate, its stream converted on the calling thread", () => {
    expect({ name: wavCodec.name, contentType: wavCodec.contentType, fixedRateHz: wavCodec.fixedRateHz, streamEncodesOn: wavCodec.streamEncodesOn }).toEqual({
      name: "wav",
      contentType: "audio/wav",
      fixedRateHz: undefined,
      streamEncodesOn: "calling-thread",
    });
  });

  test.each([24000, 22050])("a file at %i Hz is the header and the samples, which ffmpeg reads back bit-exact", async (sampleRateHz) => {
    const input = sine(440, sampleRateHz, sampleRateHz);
    const file = await wavCodec.encodeFile(input, sampleRateHz, {}, NO_PAUSE);
    expect(file.subarray(0, 44)).toEqual(wavHeader(sampleRateHz, 2 * input.length));
    const decoded = decodeFile(file, "wav", sampleRateHz);
    expect(decoded.sampleRateHz).toBe(sampleRateHz);
    expectBitExact(decoded.samples, floatToInt16(input));
  });

  test("a stream is the streaming header, then the samples as they come; an empty one is the header alone", async () => {
    const input = sine(440, 24000, 24000);
    const stream = await streamed(await wavCodec.createStream(24000, {}), input, 1920);
    expect(stream.subarray(0, 44)).toEqual(wavHeader(24000, "streaming"));
    expect(stream.subarray(44)).toEqual(pcm16Bytes(input));
    expect(await streamed(await wavCodec.createStream(24000, {}), new Float32Array(0), 1920)).toEqual(wavHeader(24000, "streaming"));
  });
});
