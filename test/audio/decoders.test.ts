import { beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AudioDecodeError, decodeAudio, downmixToMono, sniffContainer, type AudioContainer, type DecodedAudio } from "../../src/audio/decoders.ts";
import { dominantFrequencyHz } from "../support/spectrum.ts";
import { muxWebmLikeABrowser } from "../support/browser-recording.ts";

const TONE_HZ = 440;
const SOURCE_RATE_HZ = 44100;
const DURATION_SECONDS = 1.5;
/** ffmpeg's sine source plays at 1/8 of full scale, and `-ac 2` spreads the mono source over both channels at −3 dB. */
const TONE_AMPLITUDE = 1 / 8 / Math.SQRT2;
const SOURCE = ["-f", "lavfi", "-i", `sine=frequency=${TONE_HZ}:sample_rate=${SOURCE_RATE_HZ}:duration=${DURATION_SECONDS}`, "-ac", "2"];

/** Samples per frame, the tolerance on length for codecs whose container may not trim to the exact sample. */
const OPUS_FRAME_SAMPLES = 960; // 20 ms at 48 kHz, ffmpeg's and browsers' default
const AAC_FRAME_SAMPLES = 1024;
const MP3_FRAME_SAMPLES = 1152;
const VORBIS_LONG_BLOCK_SAMPLES = 2048;

interface Fixture {
  name: string;
  fileName: string;
  ffmpegArgs: string[];
  container: AudioContainer;
  sampleRateHz: number;
  /**
   * How far the decoded length may be from the source's. Lossless formats are exact. MP3 (LAME tag),
   * Ogg (granule positions) and MP4 (edit list) declare the exact length and come out exact today; the
   * tolerance is one frame so that an encoder update cannot fail the test. WebM keeps up to one Opus frame
   * of end padding (no DiscardPadding support). ADTS declares nothing: its priming is absorbed by the frame
   * that FAAD2 withholds, and its end padding (410 samples here) stays.
   */
  toleranceSamples: number;
}

const FIXTURES: Fixture[] = [
  { name: "WAV s16", fileName: "s16.wav", ffmpegArgs: ["-c:a", "pcm_s16le"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "WAV s24 (EXTENSIBLE)", fileName: "s24.wav", ffmpegArgs: ["-c:a", "pcm_s24le"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "WAV s32 (EXTENSIBLE)", fileName: "s32.wav", ffmpegArgs: ["-c:a", "pcm_s32le"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "WAV f32 (EXTENSIBLE)", fileName: "f32.wav", ffmpegArgs: ["-c:a", "pcm_f32le"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "WAV f64 (EXTENSIBLE)", fileName: "f64.wav", ffmpegArgs: ["-c:a", "pcm_f64le"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "WAV u8", fileName: "u8.wav", ffmpegArgs: ["-c:a", "pcm_u8"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "FLAC", fileName: "tone.flac", ffmpegArgs: ["-c:a", "flac"], container: "flac", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "Ogg FLAC", fileName: "flac.oga", ffmpegArgs: ["-c:a", "flac", "-f", "ogg"], container: "ogg", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  // ffmpeg writes an ID3v2 tag in front of the first frame, so this also covers the tag skip.
  { name: "MP3 (ID3-tagged)", fileName: "tone.mp3", ffmpegArgs: ["-c:a", "libmp3lame"], container: "mp3", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: MP3_FRAME_SAMPLES },
  { name: "Ogg Vorbis", fileName: "vorbis.ogg", ffmpegArgs: ["-c:a", "libvorbis"], container: "ogg", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: VORBIS_LONG_BLOCK_SAMPLES },
  { name: "Ogg Opus", fileName: "tone.opus", ffmpegArgs: ["-c:a", "libopus"], container: "ogg", sampleRateHz: 48000, toleranceSamples: OPUS_FRAME_SAMPLES },
  // The layout of Chromium's MediaRecorder output: EBML, one Opus track, SimpleBlocks.
  { name: "WebM Opus", fileName: "tone.webm", ffmpegArgs: ["-c:a", "libopus", "-f", "webm"], container: "webm", sampleRateHz: 48000, toleranceSamples: OPUS_FRAME_SAMPLES },
  { name: "M4A AAC", fileName: "tone.m4a", ffmpegArgs: ["-c:a", "aac"], container: "mp4", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: AAC_FRAME_SAMPLES },
  // Fragmented, as MediaRecorder writes MP4; no edit list, so the Opus pre-skip alone trims the start.
  {
    name: "fragmented MP4 Opus",
    fileName: "fragmented.mp4",
    ffmpegArgs: ["-c:a", "libopus", "-movflags", "frag_keyframe+empty_moov+default_base_moof"],
    container: "mp4",
    sampleRateHz: 48000,
    toleranceSamples: OPUS_FRAME_SAMPLES,
  },
  { name: "ADTS AAC", fileName: "tone.aac", ffmpegArgs: ["-c:a", "aac", "-f", "adts"], container: "aac", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: AAC_FRAME_SAMPLES },
];

const encoded = new Map<string, Uint8Array>();

function runFfmpeg(args: string[]): Uint8Array {
  const result = spawnSync("ffmpeg", ["-v", "error", "-y", ...args], { maxBuffer: 1 << 26 });
  if (result.error) throw new Error(`ffmpeg is required by these tests: apt-get install ffmpeg (${result.error.message})`);
  if (result.status !== 0) throw new Error(`ffmpeg failed: ${result.stderr.toString()}`);
  return new Uint8Array(result.stdout);
}

beforeAll(() => {
  // Files, not pipes: the MP4 muxer seeks back to write its index, and a WAV written to a pipe has no sizes.
  const directory = mkdtempSync(join(tmpdir(), "voxedge-decoders-"));
  try {
    for (const fixture of FIXTURES) {
      const path = join(directory, fixture.fileName);
      runFfmpeg([...SOURCE, ...fixture.ffmpegArgs, path]);
      encoded.set(fixture.name, new Uint8Array(readFileSync(path)));
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
});

function bytesOf(name: string): Uint8Array {
  const bytes = encoded.get(name);
  if (!bytes) throw new Error(`no fixture ${name}`);
  return bytes;
}

function rms(samples: Float32Array): number {
  let sum = 0;
  for (const sample of samples) sum += sample * sample;
  return Math.sqrt(sum / samples.length);
}

function expectTone(audio: DecodedAudio, sampleRateHz: number): void {
  expect(audio.sampleRateHz).toBe(sampleRateHz);
  expect(audio.channels).toHaveLength(2);
  const [left, right] = audio.channels;
  expect(right!.length).toBe(left!.length);
  const mono = downmixToMono(audio);
  expect(Math.abs(dominantFrequencyHz(mono, sampleRateHz) - TONE_HZ)).toBeLessThan(1);
  // The level catches a wrong sample scale (8-bit offset, 24-bit sign) that leaves the pitch intact.
  const middle = mono.subarray(Math.floor(mono.length / 4), Math.floor((3 * mono.length) / 4));
  // Lossy codecs keep the level within a few percent (LAME at 128 kb/s: −5%).
  expect(Math.abs(rms(middle) / (TONE_AMPLITUDE / Math.SQRT2) - 1)).toBeLessThan(0.1);
}

describe("decodeAudio: every supported format", () => {
  for (const fixture of FIXTURES) {
    test(fixture.name, async () => {
      const bytes = bytesOf(fixture.name);
      expect(sniffContainer(bytes)).toBe(fixture.container);
      const audio = await decodeAudio(bytes);
      expectTone(audio, fixture.sampleRateHz);
      const expectedSamples = DURATION_SECONDS * fixture.sampleRateHz;
      expect(Math.abs(audio.channels[0]!.length - expectedSamples)).toBeLessThanOrEqual(fixture.toleranceSamples);
    });
  }

  test("the 24-, 32-bit and float WAVs exercise WAVE_FORMAT_EXTENSIBLE", () => {
    for (const name of ["WAV s24 (EXTENSIBLE)", "WAV s32 (EXTENSIBLE)", "WAV f32 (EXTENSIBLE)", "WAV f64 (EXTENSIBLE)"]) {
      const formatTag = new DataView(bytesOf(name).buffer).getUint16(20, true);
      expect(formatTag).toBe(0xfffe);
    }
  });

  test("a streamed WAV (sizes left at 0xFFFFFFFF, as ffmpeg writes to a pipe) decodes to the end", async () => {
    const bytes = runFfmpeg([...SOURCE, "-c:a", "pcm_s16le", "-f", "wav", "pipe:1"]);
    expect(new DataView(bytes.buffer).getUint32(4, true)).toBe(0xffffffff);
    const audio = await decodeAudio(bytes);
    expectTone(audio, SOURCE_RATE_HZ);
    expect(audio.channels[0]!.length).toBe(DURATION_SECONDS * SOURCE_RATE_HZ);
  });

  test("a WebM muxed by mediabunny in live mode, like a browser's MediaRecorder", async () => {
    const audio = await decodeAudio(await muxWebmLikeABrowser(bytesOf("Ogg Opus")));
    expectTone(audio, 48000);
    expect(Math.abs(audio.channels[0]!.length - DURATION_SECONDS * 48000)).toBeLessThanOrEqual(OPUS_FRAME_SAMPLES);
  });

  test("concurrent decodes give the same result as sequential ones", async () => {
    const names = FIXTURES.filter((fixture) => fixture.container !== "wav").map((fixture) => fixture.name);
    const sequential: DecodedAudio[] = [];
    for (const name of names) sequential.push(await decodeAudio(bytesOf(name)));
    const concurrent = await Promise.all(names.map((name) => decodeAudio(bytesOf(name))));
    concurrent.forEach((audio, i) => expect(audio.channels).toEqual(sequential[i]!.channels));
  });
});

/** Deterministic noise: a failure must reproduce. */
function pseudoRandomBytes(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let state = seed;
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    bytes[i] = state >>> 24;
  }
  return bytes;
}

function withPrefix(prefix: number[] | string, rest: Uint8Array): Uint8Array {
  const head = typeof prefix === "string" ? Array.from(prefix, (character) => character.charCodeAt(0)) : prefix;
  const bytes = new Uint8Array(head.length + rest.length);
  bytes.set(head);
  bytes.set(rest, head.length);
  return bytes;
}

async function expectDecodeError(bytes: Uint8Array, message: RegExp): Promise<void> {
  const error = await decodeAudio(bytes).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(AudioDecodeError);
  expect((error as Error).message).toMatch(message);
}

describe("decodeAudio: bad input throws AudioDecodeError", () => {
  test("an empty buffer", async () => {
    await expectDecodeError(new Uint8Array(0), /empty/);
  });

  test("garbage bytes", async () => {
    const garbage = pseudoRandomBytes(4096, 1);
    garbage[0] = 0x00; // not the first byte of any signature
    expect(sniffContainer(garbage)).toBeUndefined();
    await expectDecodeError(garbage, /unrecognised audio format/);
  });

  // No MP3 case: an MPEG audio frame has no checksum, so a valid header over noise decodes, as noise, in mpg123 and ffmpeg alike.
  const noise = pseudoRandomBytes(4096, 2);
  const garbageBehindSignatures: [string, Uint8Array][] = [
    ["WAV", withPrefix("RIFF\xff\xff\xff\xffWAVE", noise)],
    ["Ogg", withPrefix("OggS", noise)],
    ["FLAC", withPrefix("fLaC", noise)],
    ["ADTS AAC", withPrefix([0xff, 0xf1, 0x50, 0x80], noise)],
    ["MP4", withPrefix("\x00\x00\x00\x18ftypmp42", noise)],
    ["WebM/Matroska", withPrefix([0x1a, 0x45, 0xdf, 0xa3], noise)],
  ];
  for (const [name, bytes] of garbageBehindSignatures) {
    test(`garbage behind a ${name} signature`, async () => {
      await expectDecodeError(bytes, new RegExp(`^${name} audio could not be decoded`));
    });
  }

  const COULD_NOT_DECODE = /could not be decoded/;
  const truncations: [string, string, number, RegExp][] = [
    ["WAV cut inside its fmt chunk", "WAV s16", 30, /fmt chunk/],
    ["FLAC cut inside STREAMINFO", "FLAC", 30, COULD_NOT_DECODE],
    ["MP3 cut inside its ID3 tag", "MP3 (ID3-tagged)", 20, /inside its ID3 tag/],
    ["Ogg Vorbis cut after the identification header", "Ogg Vorbis", 58, COULD_NOT_DECODE],
    ["Ogg Opus cut after the identification header", "Ogg Opus", 47, COULD_NOT_DECODE],
    ["WebM cut inside its track header", "WebM Opus", 120, COULD_NOT_DECODE],
    ["M4A cut in half (its moov index is at the end)", "M4A AAC", -1, COULD_NOT_DECODE],
    ["ADTS cut inside its first frame", "ADTS AAC", 100, COULD_NOT_DECODE],
  ];
  for (const [label, fixtureName, keptBytes, message] of truncations) {
    test(`a truncated file: ${label}`, async () => {
      const bytes = bytesOf(fixtureName);
      await expectDecodeError(bytes.subarray(0, keptBytes < 0 ? bytes.length >> 1 : keptBytes), message);
    });
  }

  test("damaged files either decode or throw AudioDecodeError, and never hang", async () => {
    const lossyNames = FIXTURES.filter((fixture) => fixture.container !== "wav").map((fixture) => fixture.name);
    for (const [index, name] of lossyNames.entries()) {
      const original = bytesOf(name);
      for (let trial = 0; trial < 4; trial++) {
        const damaged = original.slice();
        const positions = pseudoRandomBytes(32, 100 * index + trial);
        // Damage the headers (first 512 bytes) on even trials, anywhere on odd ones.
        const span = trial % 2 === 0 ? Math.min(512, damaged.length) : damaged.length;
        for (let k = 0; k < positions.length; k += 2) damaged[(positions[k]! * 257 + positions[k + 1]!) % span] = positions[k + 1]!;
        const outcome = await decodeAudio(damaged).then(
          () => "decoded",
          (error: unknown) => (error instanceof AudioDecodeError ? "rejected" : error),
        );
        expect([name, outcome]).toEqual([name, expect.stringMatching(/^(decoded|rejected)$/)]);
      }
    }
  });
});

describe("the part of a file that arrived", () => {
  test("a WAV cut inside its audio data decodes to the whole frames that arrived", async () => {
    const bytes = bytesOf("WAV s16");
    const dataStart = bytes.length - DURATION_SECONDS * SOURCE_RATE_HZ * 4;
    const audio = await decodeAudio(bytes.subarray(0, dataStart + 1000 * 4 + 3));
    expect(audio.channels[0]!.length).toBe(1000);
  });
});

describe("downmixToMono", () => {
  test("averages the channels", () => {
    const mono = downmixToMono({ channels: [new Float32Array([1, 0.5, -1]), new Float32Array([1, -0.5, 0])], sampleRateHz: 8000 });
    expect(Array.from(mono)).toEqual([1, 0, -0.5]);
  });

  test("returns a mono input's channel as is", () => {
    const channel = new Float32Array([0.25, -0.25]);
    expect(downmixToMono({ channels: [channel], sampleRateHz: 8000 })).toBe(channel);
  });
});
