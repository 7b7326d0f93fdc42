/** The opus codec: Ogg Opus whose OpusHead names the input's rate, at the bitrate asked; a stream decodes to the file's length. */
import { describe, expect, test } from "bun:test";
import { opusCodec } from "../../../src/audio/codecs/opus.ts";
import { NO_PAUSE } from "../../../src/audio/pause.ts";
import { decodeFile, sine, streamed } from "../../support/encoded-file.ts";

const OGG_OPUS_RATE_HZ = 48000;

/** The RFC 7845 identification header: the first Ogg packet, found by its magic. */
function readOpusHead(file: Uint8Array): { channels: number; preSkip: number; inputSampleRateHz: number } {
  const magic = new TextEncoder().encode("OpusHead");
  const at = file.findIndex((_, i) => magic.every((byte, j) => file[i + j] === byte));
  if (at < 0) throw new Error("no OpusHead in the Ogg stream");
  const view = new DataView(file.buffer, file.byteOffset + at);
  return { channels: view.getUint8(9), preSkip: view.getUint16(10, true), inputSampleRateHz: view.getUint32(12, true) };
}

describe("opus", () => {
  test("is audio/ogg at any rate, its stream encoded on the encoder worker", () => {
    expect({ name: opusCodec.name, contentType: opusCodec.contentType, fixedRateHz: opusCodec.fixedRateHz, streamEncodesOn: opusCodec.streamEncodesOn }).toEqual({
      name: "opus",
      contentType: "audio/ogg",
      fixedRateHz: undefined,
      streamEncodesOn: "encoder-worker",
    });
  });

  test("opus honours a requested bitrate", async () => {
    const input = sine(440, 48000, 48000 * 2);
    const low = await opusCodec.encodeFile(input, 48000, { bitrateKbps: 32 }, NO_PAUSE);
    const high = await opusCodec.encodeFile(input, 48000, { bitrateKbps: 128 }, NO_PAUSE);
    expect(high.length).toBeGreaterThan(2 * low.length);
    expect(decodeFile(low, "opus", 48000).samples.length).toBe(input.length);
  });

  test("at 22.05 kHz the encoder runs at 24 kHz; OpusHead still names the rate the audio came in at", async () => {
    const file = await opusCodec.encodeFile(sine(440, 22050, 22050), 22050, {}, NO_PAUSE);
    expect(readOpusHead(file)).toEqual({ channels: 1, preSkip: 312, inputSampleRateHz: 22050 });
  });

  test("a stream decodes to exactly the input's length at 48 kHz, as the file does", async () => {
    const input = sine(440, 22050, 33075);
    const stream = await streamed(await opusCodec.createStream(22050, {}), input, 1764);
    expect(readOpusHead(stream).inputSampleRateHz).toBe(22050);
    const decoded = decodeFile(stream, "opus", 22050);
    expect(decoded.sampleRateHz).toBe(OGG_OPUS_RATE_HZ);
    expect(decoded.samples.length).toBe(decodeFile(await opusCodec.encodeFile(input, 22050, {}, NO_PAUSE), "opus", 22050).samples.length);
  });
});
