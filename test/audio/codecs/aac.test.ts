/** The aac codec: ADTS frames from ffmpeg's wasm, which keeps working run after run; a stream's frames are the file's count. */
import { describe, expect, test } from "bun:test";
import { aacCodec, adtsFrames } from "../../../src/audio/codecs/aac.ts";
import { NO_PAUSE } from "../../../src/audio/pause.ts";
import { decodeFile, sine, streamed } from "../../support/encoded-file.ts";

describe("aac", () => {
  test("is audio/aac at any rate, its stream encoded on the encoder worker", () => {
    expect({ name: aacCodec.name, contentType: aacCodec.contentType, fixedRateHz: aacCodec.fixedRateHz, streamEncodesOn: aacCodec.streamEncodesOn }).toEqual({
      name: "aac",
      contentType: "audio/aac",
      fixedRateHz: undefined,
      streamEncodesOn: "encoder-worker",
    });
  });

  test("AAC keeps working over hundreds of encodes, each the same bytes", async () => {
    // One ffmpeg instance used to trap on its 148th run and fail every AAC request after that.
    const input = sine(440, 24000, 2400);
    const first = await aacCodec.encodeFile(input, 24000, {}, NO_PAUSE);
    for (let run = 1; run < 300; run++) expect(await aacCodec.encodeFile(input, 24000, {}, NO_PAUSE)).toEqual(first);
  }, 120_000);

  test("a stream's frames are as many as the file's and decode to as many samples", async () => {
    const input = sine(440, 24000, 24000);
    const file = await aacCodec.encodeFile(input, 24000, {}, NO_PAUSE);
    const stream = await streamed(await aacCodec.createStream(24000, {}), input, 1920);
    expect(adtsFrames(stream).length).toBe(adtsFrames(file).length);
    expect(decodeFile(stream, "aac", 24000).samples.length).toBe(decodeFile(file, "aac", 24000).samples.length);
  });
});
