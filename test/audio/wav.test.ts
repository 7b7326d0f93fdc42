import { describe, expect, test } from "bun:test";
import { encodeWav, floatToInt16, pcm16Bytes, wavHeader } from "../../src/audio/wav.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";

interface ParsedWavHeader {
  riff: string;
  riffBytes: number;
  wave: string;
  fmt: string;
  fmtBytes: number;
  formatTag: number;
  channels: number;
  sampleRateHz: number;
  byteRate: number;
  blockAlign: number;
  bitsPerSample: number;
  data: string;
  dataBytes: number;
}

/** Reads the canonical 44-byte header field by field, as a strict WAV parser would. */
function parseWavHeader(header: Uint8Array): ParsedWavHeader {
  expect(header.length).toBe(44);
  const view = new DataView(header.buffer, header.byteOffset, header.byteLength);
  const tag = (offset: number) => String.fromCharCode(...header.subarray(offset, offset + 4));
  return {
    riff: tag(0),
    riffBytes: view.getUint32(4, true),
    wave: tag(8),
    fmt: tag(12),
    fmtBytes: view.getUint32(16, true),
    formatTag: view.getUint16(20, true),
    channels: view.getUint16(22, true),
    sampleRateHz: view.getUint32(24, true),
    byteRate: view.getUint32(28, true),
    blockAlign: view.getUint16(32, true),
    bitsPerSample: view.getUint16(34, true),
    data: tag(36),
    dataBytes: view.getUint32(40, true),
  };
}

const PCM16_MONO_24K = {
  riff: "RIFF",
  wave: "WAVE",
  fmt: "fmt ",
  fmtBytes: 16,
  formatTag: 1,
  channels: 1,
  sampleRateHz: 24000,
  byteRate: 48000,
  blockAlign: 2,
  bitsPerSample: 16,
  data: "data",
};

describe("floatToInt16", () => {
  test("scales by 32767, rounds to nearest, clips out-of-range values and maps NaN to 0", () => {
    const input = Float32Array.of(0, 1, -1, 0.5, -0.5, 1.5, -7, 0.4 / 32767, 0.6 / 32767, Number.NaN);
    expect(Array.from(floatToInt16(input))).toEqual([0, 32767, -32767, 16384, -16384, 32767, -32767, 0, 1, 0]);
  });
});

describe("pcm16Bytes", () => {
  test("is two little-endian bytes per sample", () => {
    const bytes = pcm16Bytes(Float32Array.of(1, -1, 256 / 32767));
    expect(bytes.length).toBe(6);
    expect(Array.from(bytes)).toEqual([0xff, 0x7f, 0x01, 0x80, 0x00, 0x01]);
  });
});

describe("wavHeader", () => {
  test("fixed-size header describes mono 16-bit PCM and the data length", () => {
    expect(parseWavHeader(wavHeader(24000, 48000))).toEqual({ ...PCM16_MONO_24K, riffBytes: 36 + 48000, dataBytes: 48000 });
  });

  test("streaming header sets both size fields to 0xFFFFFFFF", () => {
    expect(parseWavHeader(wavHeader(24000, "streaming"))).toEqual({ ...PCM16_MONO_24K, riffBytes: 0xffffffff, dataBytes: 0xffffffff });
  });

  test("ffmpeg reads a streaming header followed by audio to the end of the data", () => {
    const samples = new Float32Array(2400).map((_, i) => 0.5 * Math.sin((2 * Math.PI * 440 * i) / 24000));
    const body = pcm16Bytes(samples);
    const stream = new Uint8Array(44 + body.length);
    stream.set(wavHeader(24000, "streaming"));
    stream.set(body, 44);
    const decoded = decodeWithFfmpeg(stream);
    expect(decoded.sampleRateHz).toBe(24000);
    expect(decoded.samples.length).toBe(samples.length);
  });

  test("rejects rates and sizes a RIFF header cannot hold", () => {
    expect(() => wavHeader(0, 0)).toThrow(RangeError);
    expect(() => wavHeader(22050.5, 0)).toThrow(RangeError);
    expect(() => wavHeader(24000, -2)).toThrow(RangeError);
    expect(() => wavHeader(24000, 1.5)).toThrow(RangeError);
    expect(() => wavHeader(24000, 0xffffffff)).toThrow(RangeError);
  });
});

describe("encodeWav", () => {
  test("is the header for the body's length followed by the PCM bytes", () => {
    const samples = Float32Array.of(0.25, -0.25, 0.75);
    const file = encodeWav(samples, 16000);
    expect(parseWavHeader(file.subarray(0, 44))).toMatchObject({ sampleRateHz: 16000, byteRate: 32000, riffBytes: 36 + 6, dataBytes: 6 });
    expect(file.subarray(44)).toEqual(pcm16Bytes(samples));
  });

  test("ffmpeg reads the rate, codec and exact length", () => {
    const decoded = decodeWithFfmpeg(encodeWav(new Float32Array(22050).fill(0.1), 22050));
    expect(decoded).toMatchObject({ sampleRateHz: 22050, channels: 1, codec: "pcm_s16le" });
    expect(decoded.samples.length).toBe(22050);
  });
});
