/** The pcm codec: headerless 16-bit little-endian samples, a stream's chunks the file's bytes cut anywhere. */
import { describe, expect, test } from "bun:test";
import { pcmCodec } from "../../../src/audio/codecs/pcm.ts";
import { NO_PAUSE } from "../../../src/audio/pause.ts";
import { floatToInt16, pcm16Bytes } from "../../../src/audio/wav.ts";
import { decodeFile, expectBitExact, sine, streamed } from "../../support/encoded-file.ts";

describe("pcm", () => {
  test("is audio/pcm at any rate, its stream converted on the calling thread", () => {
    expect({ name: pcmCodec.name, contentType: pcmCodec.contentType, fixedRateHz: pcmCodec.fixedRateHz, streamEncodesOn: pcmCodec.streamEncodesOn }).toEqual({
      name: "pcm",
      contentType: "audio/pcm",
      fixedRateHz: undefined,
      streamEncodesOn: "calling-thread",
    });
  });

  test("a file is two bytes a sample, which ffmpeg reads back bit-exact", async () => {
    // Longer than one 64 Ki-sample slice, so that the slices are seen to join.
    const input = sine(440, 24000, 100_000);
    const file = await pcmCodec.encodeFile(input, 24000, {}, NO_PAUSE);
    expect(file).toEqual(pcm16Bytes(input));
    expectBitExact(decodeFile(file, "pcm", 24000).samples, floatToInt16(input));
  });

  test("a stream's joined chunks are the file", async () => {
    const input = sine(440, 24000, 24000);
    expect(await streamed(await pcmCodec.createStream(24000, {}), input, 1920)).toEqual(await pcmCodec.encodeFile(input, 24000, {}, NO_PAUSE));
  });
});
