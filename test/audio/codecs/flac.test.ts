/** The flac codec: lossless, its STREAMINFO completed after the encode; a stream's frames decode to the same samples. */
import { createHash } from "node:crypto";
import { describe, expect, test } from "bun:test";
import { flacCodec } from "../../../src/audio/codecs/flac.ts";
import { NO_PAUSE } from "../../../src/audio/pause.ts";
import { floatToInt16, pcm16Bytes } from "../../../src/audio/wav.ts";
import { decodeFile, expectBitExact, sine, streamed } from "../../support/encoded-file.ts";

describe("flac", () => {
  test("is audio/flac at any rate, its stream encoded on the encoder worker", () => {
    expect({ name: flacCodec.name, contentType: flacCodec.contentType, fixedRateHz: flacCodec.fixedRateHz, streamEncodesOn: flacCodec.streamEncodesOn }).toEqual({
      name: "flac",
      contentType: "audio/flac",
      fixedRateHz: undefined,
      streamEncodesOn: "encoder-worker",
    });
  });

  test("FLAC's STREAMINFO carries the MD5 of the audio and real frame-size bounds", async () => {
    const input = sine(440, 24000, 24000);
    const file = await flacCodec.encodeFile(input, 24000, {}, NO_PAUSE);
    const streamInfo = file.subarray(8, 8 + 34);
    const minFrameBytes = (streamInfo[4]! << 16) | (streamInfo[5]! << 8) | streamInfo[6]!;
    const maxFrameBytes = (streamInfo[7]! << 16) | (streamInfo[8]! << 8) | streamInfo[9]!;
    expect(minFrameBytes).toBeGreaterThan(0);
    expect(maxFrameBytes).toBeGreaterThanOrEqual(minFrameBytes);
    expect(Buffer.from(streamInfo.subarray(18, 34)).toString("hex")).toBe(createHash("md5").update(pcm16Bytes(input)).digest("hex"));
  });

  test("a stream decodes to the same samples, bit-exact", async () => {
    const input = sine(440, 24000, 24000);
    const stream = await streamed(await flacCodec.createStream(24000, {}), input, 1920);
    const decoded = decodeFile(stream, "flac", 24000);
    expect(decoded.sampleRateHz).toBe(24000);
    expectBitExact(decoded.samples, floatToInt16(input));
  });
});
