import { describe, expect, test } from "bun:test";
import { decodeWav, encodeWav, floatToInt16, pcm16Bytes, readWavLayout, wavHeader } from "../../src/audio/wav.ts";
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

/** A RIFF/WAVE file of the given chunks, each padded to an even length; `declaredBytes` overrides a chunk's size field. */
function riffWave(chunks: { tag: string; body: Uint8Array; declaredBytes?: number }[]): Uint8Array {
  const parts: number[] = [];
  const pushUint32 = (value: number) => parts.push(value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, (value >>> 24) & 0xff);
  const pushTag = (tag: string) => parts.push(...Array.from(tag, (character) => character.charCodeAt(0)));
  pushTag("RIFF");
  pushUint32(0);
  pushTag("WAVE");
  for (const chunk of chunks) {
    pushTag(chunk.tag);
    pushUint32(chunk.declaredBytes ?? chunk.body.length);
    parts.push(...chunk.body);
    if (chunk.body.length % 2 === 1) parts.push(0);
  }
  return Uint8Array.from(parts);
}

/** A fmt chunk body: format tag, channels, rate, block align and bits, optionally WAVE_FORMAT_EXTENSIBLE around `formatTag`. */
function fmtChunk(options: { formatTag: number; channels: number; sampleRateHz: number; bitsPerSample: number; extensible?: boolean }): Uint8Array {
  const body = new Uint8Array(options.extensible ? 40 : 16);
  const view = new DataView(body.buffer);
  const blockAlign = options.channels * Math.ceil(options.bitsPerSample / 8);
  view.setUint16(0, options.extensible ? 0xfffe : options.formatTag, true);
  view.setUint16(2, options.channels, true);
  view.setUint32(4, options.sampleRateHz, true);
  view.setUint32(8, options.sampleRateHz * blockAlign, true);
  view.setUint16(12, blockAlign, true);
  view.setUint16(14, options.bitsPerSample, true);
  if (options.extensible) {
    view.setUint16(16, 22, true);
    view.setUint16(24, options.formatTag, true);
    body.set([0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71], 28);
  }
  return body;
}

const bytesOf = (view: ArrayBufferView) => new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
const PCM16_MONO_16K = fmtChunk({ formatTag: 1, channels: 1, sampleRateHz: 16000, bitsPerSample: 16 });

describe("decodeWav (the one WAV reader: uploads, ref_audio and the classic model's Flite output)", () => {
  test("reads back what encodeWav wrote, as the 16-bit values over 32768", () => {
    const samples = Float32Array.of(0, 0.5, -0.5, 1, -1, 0.123);
    const decoded = decodeWav(encodeWav(samples, 16000));
    expect(decoded.sampleRateHz).toBe(16000);
    expect(decoded.channels).toHaveLength(1);
    expect(Array.from(decoded.channels[0]!)).toEqual(Array.from(floatToInt16(samples), (value) => value / 32768));
  });

  test("reads float samples as floats, not as 16-bit integers", () => {
    const values = Float32Array.of(0.25, -0.75, 0.5, 1);
    const file = riffWave([
      { tag: "fmt ", body: fmtChunk({ formatTag: 3, channels: 1, sampleRateHz: 24000, bitsPerSample: 32 }) },
      { tag: "data", body: bytesOf(values) },
    ]);
    expect(decodeWav(file)).toEqual({ channels: [values], sampleRateHz: 24000 });
  });

  test("reads 8-bit unsigned, 24-bit and WAVE_FORMAT_EXTENSIBLE stereo PCM", () => {
    const eightBit = riffWave([
      { tag: "fmt ", body: fmtChunk({ formatTag: 1, channels: 1, sampleRateHz: 8000, bitsPerSample: 8 }) },
      { tag: "data", body: Uint8Array.of(128, 192, 64) },
    ]);
    expect(Array.from(decodeWav(eightBit).channels[0]!)).toEqual([0, 0.5, -0.5]);
    const twentyFourBit = riffWave([
      { tag: "fmt ", body: fmtChunk({ formatTag: 1, channels: 1, sampleRateHz: 48000, bitsPerSample: 24 }) },
      { tag: "data", body: Uint8Array.of(0x00, 0x00, 0x40, 0x00, 0x00, 0xc0) },
    ]);
    expect(Array.from(decodeWav(twentyFourBit).channels[0]!)).toEqual([0.5, -0.5]);
    const stereo = riffWave([
      { tag: "fmt ", body: fmtChunk({ formatTag: 1, channels: 2, sampleRateHz: 44100, bitsPerSample: 16, extensible: true }) },
      { tag: "data", body: bytesOf(Int16Array.of(16384, -16384, 8192, -8192)) },
    ]);
    const decoded = decodeWav(stereo);
    expect(decoded.sampleRateHz).toBe(44100);
    expect(decoded.channels.map((channel) => Array.from(channel))).toEqual([
      [0.5, 0.25],
      [-0.5, -0.25],
    ]);
  });

  test("skips other chunks, odd-sized ones by their pad byte, and stops at the declared data size", () => {
    const file = riffWave([
      { tag: "LIST", body: Uint8Array.of(1, 2, 3) },
      { tag: "fmt ", body: PCM16_MONO_16K },
      { tag: "data", body: bytesOf(Int16Array.of(16384, 8192)) },
      { tag: "junk", body: Uint8Array.of(0xff, 0x7f) },
    ]);
    expect(Array.from(decodeWav(file).channels[0]!)).toEqual([0.5, 0.25]);
  });

  test("a streamed size (0xFFFFFFFF) or a cut file runs to the end, dropping a partial frame", () => {
    const file = riffWave([
      { tag: "fmt ", body: PCM16_MONO_16K },
      { tag: "data", body: Uint8Array.of(0x00, 0x40, 0x00, 0x20), declaredBytes: 0xffffffff },
    ]);
    expect(readWavLayout(file)).toMatchObject({ dataByteOffset: 44, dataBytes: 4 });
    expect(Array.from(decodeWav(file).channels[0]!)).toEqual([0.5, 0.25]);
    const cut = encodeWav(Float32Array.of(0.5, 0.5, 0.5), 16000).subarray(0, 44 + 3);
    expect(decodeWav(cut).channels[0]!.length).toBe(1);
  });

  test("refuses what is not a WAV file, or one whose chunks are out of order, truncated or unsupported", () => {
    expect(() => decodeWav(new TextEncoder().encode("RIFF....AVI LIST"))).toThrow("not a RIFF/WAVE file");
    expect(() => decodeWav(Uint8Array.of(0x52, 0x49))).toThrow("not a RIFF/WAVE file");
    expect(() => decodeWav(riffWave([{ tag: "data", body: Uint8Array.of(0, 0) }, { tag: "fmt ", body: PCM16_MONO_16K }]))).toThrow("the data chunk comes before the fmt chunk");
    expect(() => decodeWav(riffWave([{ tag: "fmt ", body: PCM16_MONO_16K }]))).toThrow("no data chunk");
    expect(() => decodeWav(riffWave([{ tag: "fmt ", body: PCM16_MONO_16K.subarray(0, 8), declaredBytes: 16 }]))).toThrow("the file ends inside its fmt chunk");
    const alaw = riffWave([{ tag: "fmt ", body: fmtChunk({ formatTag: 6, channels: 1, sampleRateHz: 8000, bitsPerSample: 8 }) }, { tag: "data", body: Uint8Array.of(0, 0) }]);
    expect(() => decodeWav(alaw)).toThrow("unsupported WAV format tag 0x6");
    const noChannels = riffWave([{ tag: "fmt ", body: fmtChunk({ formatTag: 1, channels: 0, sampleRateHz: 8000, bitsPerSample: 16 }) }, { tag: "data", body: Uint8Array.of(0, 0) }]);
    expect(() => decodeWav(noChannels)).toThrow("the fmt chunk declares 0 channels");
  });
});
