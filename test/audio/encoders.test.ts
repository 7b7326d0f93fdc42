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
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MPEGDecoder } from "mpg123-decoder";
import { CONTENT_TYPES, encodeAudio, type ResponseFormat } from "../../src/audio/encoders.ts";
import { floatToInt16, pcm16Bytes } from "../../src/audio/wav.ts";
import { decodeWithFfmpeg, type DecodedAudio } from "../support/ffmpeg.ts";
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

function sine(frequencyHz: number, sampleRateHz: number, sampleCount: number, amplitude = 0.5): Float32Array {
  const samples = new Float32Array(sampleCount);
  for (let i = 0; i < sampleCount; i++) samples[i] = amplitude * Math.sin((2 * Math.PI * frequencyHz * i) / sampleRateHz);
  return samples;
}

/** ffmpeg's demuxers for the headerless formats. */
const RAW_DEMUXERS = { pcm: "s16le", ulaw: "mulaw", alaw: "alaw" } as const;

let scratchDir = "";
let scratchFiles = 0;

interface ProbedAudio extends DecodedAudio {
  startTimeSeconds: number;
  encoderTag: string | undefined;
}

/**
 * Decodes from a file, as a client that saved the response would: ffmpeg applies an MP3 Info tag's
 * end trimming only to seekable input, so from a pipe (test/support's decoder) MP3 keeps its padding.
 * Raw PCM has no header, so ffmpeg is told its layout.
 */
function decodeFile(bytes: Uint8Array, format: ResponseFormat, sampleRateHz: number): ProbedAudio {
  const path = join(scratchDir, `${scratchFiles++}.${format === "opus" ? "ogg" : format}`);
  writeFileSync(path, bytes);
  const rawInput = format === "pcm" || format === "ulaw" || format === "alaw" ? ["-f", RAW_DEMUXERS[format], "-ar", String(sampleRateHz), "-ac", "1"] : [];
  const probe = spawnSync("ffprobe", ["-v", "error", ...rawInput, "-show_streams", "-of", "json", path]);
  if (probe.status !== 0) throw new Error(`ffprobe could not read ${format}: ${probe.stderr}`);
  const stream = JSON.parse(probe.stdout.toString()).streams[0];
  const decoded = spawnSync("ffmpeg", ["-v", "error", ...rawInput, "-i", path, "-f", "f32le", "pipe:1"], { maxBuffer: 1 << 26 });
  if (decoded.status !== 0) throw new Error(`ffmpeg could not decode ${format}: ${decoded.stderr}`);
  const out = decoded.stdout as Buffer;
  return {
    sampleRateHz: Number(stream.sample_rate),
    channels: stream.channels,
    codec: stream.codec_name,
    samples: new Float32Array(out.buffer.slice(out.byteOffset, out.byteOffset + out.byteLength)),
    startTimeSeconds: Number(stream.start_time ?? 0),
    encoderTag: stream.tags?.encoder,
  };
}

/** Every sample of a 16-bit source comes back from ffmpeg's s16 → f32 conversion as value / 32768. */
function expectBitExact(decoded: Float32Array, expected: Int16Array): void {
  expect(decoded.length).toBe(expected.length);
  let mismatches = 0;
  for (let i = 0; i < expected.length; i++) if (Math.round(decoded[i]! * 32768) !== expected[i]) mismatches++;
  expect(mismatches).toBe(0);
}

function expectLength(format: ResponseFormat, sampleRateHz: number, inputSamples: number, decodedSamples: number): void {
  switch (format) {
    case "wav":
    case "pcm":
    case "flac":
    case "mp3":
      expect(decodedSamples).toBe(inputSamples);
      return;
    case "ulaw":
    case "alaw":
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

/** The RFC 7845 identification header: the first Ogg packet, found by its magic. */
function readOpusHead(file: Uint8Array): { channels: number; preSkip: number; inputSampleRateHz: number } {
  const magic = new TextEncoder().encode("OpusHead");
  const at = file.findIndex((_, i) => magic.every((byte, j) => file[i + j] === byte));
  if (at < 0) throw new Error("no OpusHead in the Ogg stream");
  const view = new DataView(file.buffer, file.byteOffset + at);
  return { channels: view.getUint8(9), preSkip: view.getUint16(10, true), inputSampleRateHz: view.getUint32(12, true) };
}

beforeAll(() => {
  for (const tool of ["ffmpeg", "ffprobe"]) {
    const probe = spawnSync(tool, ["-version"]);
    if (probe.error || probe.status !== 0) throw new Error(`${tool} not found; these tests decode with it: apt-get install ffmpeg`);
  }
  scratchDir = mkdtempSync(join(tmpdir(), "voxedge-encoders-"));
});

afterAll(() => rmSync(scratchDir, { recursive: true, force: true }));

describe("encodeAudio", () => {
  test("content types", () => {
    expect(CONTENT_TYPES).toEqual({ wav: "audio/wav", pcm: "audio/pcm", mp3: "audio/mpeg", flac: "audio/flac", opus: "audio/ogg", aac: "audio/aac", ulaw: "audio/basic", alaw: "audio/x-alaw-basic" });
  });

  test.each(["ulaw", "alaw"] as const)("%s is one G.711 byte per sample that ffmpeg decodes to the same tone", async (format) => {
    const input = sine(TONE_HZ, 8000, 8000);
    const encoded = await encodeAudio(input, 8000, format);
    expect(encoded.length).toBe(input.length);
    const decoded = decodeFile(encoded, format, 8000);
    expect(decoded.sampleRateHz).toBe(8000);
    expect(decoded.samples.length).toBe(input.length);
    expect(Math.abs(dominantFrequencyHz(decoded.samples, 8000) - TONE_HZ)).toBeLessThan(FREQUENCY_TOLERANCE_HZ);
  });

  test.each([
    { sampleRateHz: 22050, bitrateKbps: 32, codedRateHz: 22050 },
    { sampleRateHz: 44100, bitrateKbps: 32, codedRateHz: 22050 },
    { sampleRateHz: 44100, bitrateKbps: 192, codedRateHz: 44100 },
  ])("mp3 at $bitrateKbps kbps from $sampleRateHz Hz is coded at $codedRateHz Hz at that bitrate, its Info tag (in a larger frame where needed) trimming exactly", async ({ sampleRateHz, bitrateKbps, codedRateHz }) => {
    const seconds = 3;
    const input = sine(TONE_HZ, sampleRateHz, seconds * sampleRateHz);
    const encoded = await encodeAudio(input, sampleRateHz, "mp3", { bitrateKbps });
    const decoded = decodeFile(encoded, "mp3", sampleRateHz);
    expect(decoded.encoderTag).toBe("LAME3.98r");
    expect(decoded.sampleRateHz).toBe(codedRateHz);
    expect(decoded.samples.length).toBe(seconds * codedRateHz);
    const kbps = (encoded.length * 8) / seconds / 1000;
    expect(Math.abs(kbps - bitrateKbps) / bitrateKbps).toBeLessThan(0.05);
  });

  test("opus honours a requested bitrate", async () => {
    const input = sine(TONE_HZ, 48000, 48000 * 2);
    const low = await encodeAudio(input, 48000, "opus", { bitrateKbps: 32 });
    const high = await encodeAudio(input, 48000, "opus", { bitrateKbps: 128 });
    expect(high.length).toBeGreaterThan(2 * low.length);
    expect(decodeFile(low, "opus", 48000).samples.length).toBe(input.length);
  });

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
    if (format === "opus") {
      // The encoder runs at 24 kHz for 22.05 kHz input; OpusHead still names the rate the audio came in at.
      expect(readOpusHead(encoded)).toEqual({ channels: 1, preSkip: 312, inputSampleRateHz: sampleRateHz });
    }
  });

  test("a rate outside MP3's table is resampled to the next one up", async () => {
    const input = sine(TONE_HZ, 20000, 30000);
    const decoded = decodeFile(await encodeAudio(input, 20000, "mp3"), "mp3", 20000);
    expect(decoded.sampleRateHz).toBe(22050);
    expect(decoded.samples.length).toBe(Math.round((input.length * 22050) / 20000));
    expect(Math.abs(dominantFrequencyHz(decoded.samples, decoded.sampleRateHz) - TONE_HZ)).toBeLessThan(FREQUENCY_TOLERANCE_HZ);
  });

  test("FLAC's STREAMINFO carries the MD5 of the audio and real frame-size bounds", async () => {
    const input = sine(TONE_HZ, 24000, 24000);
    const file = await encodeAudio(input, 24000, "flac");
    const streamInfo = file.subarray(8, 8 + 34);
    const minFrameBytes = (streamInfo[4]! << 16) | (streamInfo[5]! << 8) | streamInfo[6]!;
    const maxFrameBytes = (streamInfo[7]! << 16) | (streamInfo[8]! << 8) | streamInfo[9]!;
    expect(minFrameBytes).toBeGreaterThan(0);
    expect(maxFrameBytes).toBeGreaterThanOrEqual(minFrameBytes);
    expect(Buffer.from(streamInfo.subarray(18, 34)).toString("hex")).toBe(createHash("md5").update(pcm16Bytes(input)).digest("hex"));
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

  test("AAC keeps working over hundreds of encodes, each the same bytes", async () => {
    // One ffmpeg instance used to trap on its 148th run and fail every AAC request after that.
    const input = sine(440, 24000, 2400);
    const first = await encodeAudio(input, 24000, "aac");
    for (let run = 1; run < 300; run++) expect(await encodeAudio(input, 24000, "aac")).toEqual(first);
  }, 120_000);

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
